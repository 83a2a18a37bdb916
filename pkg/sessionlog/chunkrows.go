package sessionlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// The harness packs runs of three or more assistant/chunk delta events into one storage row
// (text-chunks, reasoning-chunks, tool-call-chunks) when it writes a log with packChunks on,
// its default. A row is storage, not an event: reading it gives back the exact events it
// replaced. Import expands rows the same way, so a packed log imports as the events the
// harness itself reads from it.

// chunkRow is a packed storage row: {type, seq0, time0, data}.
type chunkRow struct {
	Type  string          `json:"type"`
	Seq0  *int64          `json:"seq0"`
	Time0 *int64          `json:"time0"`
	Data  json.RawMessage `json:"data"`
}

// chunkRowData is a row's data: {turn, step, index, dt, texts} or, for tool-call-chunks,
// {turn, step, index, id, name?, dt, args}.
type chunkRowData struct {
	Turn  *json.Number `json:"turn"`
	Step  *json.Number `json:"step"`
	Index *json.Number `json:"index"`
	ID    *string      `json:"id"`
	Name  *string      `json:"name"`
	Dt    []int64      `json:"dt"`
	Texts []string     `json:"texts"`
	Args  []string     `json:"args"`
}

// expandChunkRow turns a packed row into the assistant/chunk events it stores, in the
// harness's key order, or says what is malformed (the harness refuses such a row too).
func expandChunkRow(line []byte, typ string) ([]harness.Event, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, fmt.Errorf("malformed %s storage row: %v", typ, err)
	}
	if len(m) != 4 || m["type"] == nil || m["seq0"] == nil || m["time0"] == nil || m["data"] == nil {
		return nil, fmt.Errorf("malformed %s storage row: envelope must be exactly {type, seq0, time0, data}", typ)
	}
	var row chunkRow
	if err := json.Unmarshal(line, &row); err != nil || row.Seq0 == nil || row.Time0 == nil || *row.Seq0 < 0 {
		return nil, fmt.Errorf("malformed %s storage row: seq0 and time0 must be integers, seq0 not negative", typ)
	}
	var dm map[string]json.RawMessage
	if err := json.Unmarshal(row.Data, &dm); err != nil {
		return nil, fmt.Errorf("malformed %s storage row: data must be an object", typ)
	}
	want := []string{"turn", "step", "index", "dt", "texts"}
	if typ == "tool-call-chunks" {
		want = []string{"turn", "step", "index", "id", "dt", "args"}
		if _, ok := dm["name"]; ok {
			want = append(want, "name")
		}
	}
	if len(dm) != len(want) {
		return nil, fmt.Errorf("malformed %s storage row: data must be exactly %v", typ, want)
	}
	for _, k := range want {
		if _, ok := dm[k]; !ok {
			return nil, fmt.Errorf("malformed %s storage row: data has no %q", typ, k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(row.Data))
	dec.UseNumber()
	var d chunkRowData
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("malformed %s storage row: %v", typ, err)
	}
	members := d.Texts
	if typ == "tool-call-chunks" {
		members = d.Args
		if d.ID == nil {
			return nil, fmt.Errorf("malformed %s storage row: id must be a string", typ)
		}
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("malformed %s storage row: its members must be a non-empty string array", typ)
	}
	if len(d.Dt) != len(members)-1 {
		return nil, fmt.Errorf("malformed %s storage row: dt length %d does not match %d members", typ, len(d.Dt), len(members))
	}
	prefix := make([]byte, 0, 64)
	prefix = append(prefix, `{"turn":`...)
	prefix = append(prefix, d.Turn.String()...)
	prefix = append(prefix, `,"step":`...)
	prefix = append(prefix, d.Step.String()...)
	prefix = append(prefix, `,"chunk":{"type":`...)
	switch typ {
	case "text-chunks":
		prefix = append(prefix, `"text-delta","index":`...)
	case "reasoning-chunks":
		prefix = append(prefix, `"reasoning-delta","index":`...)
	default:
		prefix = append(prefix, `"tool-call-delta","index":`...)
	}
	prefix = append(prefix, d.Index.String()...)
	if typ == "tool-call-chunks" {
		prefix = append(prefix, `,"id":`...)
		prefix = appendJSString(prefix, *d.ID)
		if d.Name != nil {
			prefix = append(prefix, `,"name":`...)
			prefix = appendJSString(prefix, *d.Name)
		}
		prefix = append(prefix, `,"argumentsDelta":`...)
	} else {
		prefix = append(prefix, `,"text":`...)
	}
	out := make([]harness.Event, len(members))
	t := *row.Time0
	for k, member := range members {
		if k > 0 {
			t += d.Dt[k-1]
		}
		data := append(append([]byte(nil), prefix...), appendJSString(nil, member)...)
		data = append(data, "}}"...)
		out[k] = harness.Event{Type: harness.TypeAssistantChunk, Seq: *row.Seq0 + int64(k), Time: t, Data: data}
	}
	return out, nil
}

// appendJSString appends s as JSON.stringify writes it: only '"', '\\' and control characters
// escaped (U+2028 and U+2029 stay as they are, unlike encoding/json), so an expanded chunk is
// the same bytes the harness writes for it unpacked.
func appendJSString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			if c < 0x20 {
				dst = append(dst, `\u00`...)
				dst = append(dst, hex[c>>4], hex[c&0xf])
			} else {
				dst = append(dst, c)
			}
		}
		i++
	}
	return append(dst, '"')
}
