package sessionlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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

// The packed row types.
const (
	rowTextChunks      = "text-chunks"
	rowReasoningChunks = "reasoning-chunks"
	rowToolCallChunks  = "tool-call-chunks"
)

// expandChunkRow turns a packed row into the assistant/chunk events it stores, in the
// harness's key order, or says what is malformed (the harness refuses such a row too).
func expandChunkRow(line []byte, typ string) ([]harness.Event, error) {
	row, d, members, err := parseChunkRow(line, typ)
	if err != nil {
		return nil, fmt.Errorf("malformed %s storage row: %w", typ, err)
	}
	prefix := chunkPrefix(typ, d)
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

// parseChunkRow checks a row's envelope and data keys exactly, as the harness does, and
// returns it with its members (texts or args).
func parseChunkRow(line []byte, typ string) (chunkRow, chunkRowData, []string, error) {
	var row chunkRow
	var d chunkRowData
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return row, d, nil, err
	}
	if err := exactKeys(m, "envelope", "type", "seq0", "time0", "data"); err != nil {
		return row, d, nil, err
	}
	if err := json.Unmarshal(line, &row); err != nil || row.Seq0 == nil || row.Time0 == nil || *row.Seq0 < 0 {
		return row, d, nil, errors.New("seq0 and time0 must be integers, seq0 not negative")
	}
	var dm map[string]json.RawMessage
	if err := json.Unmarshal(row.Data, &dm); err != nil {
		return row, d, nil, errors.New("data must be an object")
	}
	want := []string{"turn", "step", "index", "dt", "texts"}
	if typ == rowToolCallChunks {
		want = []string{"turn", "step", "index", "id", "dt", "args"}
		if _, ok := dm["name"]; ok {
			want = append(want, "name")
		}
	}
	if err := exactKeys(dm, "data", want...); err != nil {
		return row, d, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(row.Data))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil || d.Turn == nil || d.Step == nil || d.Index == nil {
		return row, d, nil, errors.New("turn, step and index must be numbers, the members strings, dt integers")
	}
	members := d.Texts
	if typ == rowToolCallChunks {
		members = d.Args
		if d.ID == nil {
			return row, d, nil, errors.New("id must be a string")
		}
	}
	if len(members) == 0 {
		return row, d, nil, errors.New("its members must be a non-empty string array")
	}
	if len(d.Dt) != len(members)-1 {
		return row, d, nil, fmt.Errorf("dt length %d does not match %d members", len(d.Dt), len(members))
	}
	return row, d, members, nil
}

// exactKeys says which key of m is missing or extra, against want.
func exactKeys(m map[string]json.RawMessage, what string, want ...string) error {
	for _, k := range want {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("%s must be exactly {%s}: %q is missing", what, strings.Join(want, ", "), k)
		}
	}
	if len(m) != len(want) {
		return fmt.Errorf("%s must be exactly {%s}", what, strings.Join(want, ", "))
	}
	return nil
}

// chunkPrefix is a member's data up to its text or argumentsDelta value.
func chunkPrefix(typ string, d chunkRowData) []byte {
	prefix := make([]byte, 0, 96)
	prefix = append(prefix, `{"turn":`...)
	prefix = append(prefix, d.Turn.String()...)
	prefix = append(prefix, `,"step":`...)
	prefix = append(prefix, d.Step.String()...)
	prefix = append(prefix, `,"chunk":{"type":`...)
	switch typ {
	case rowTextChunks:
		prefix = append(prefix, `"text-delta","index":`...)
	case rowReasoningChunks:
		prefix = append(prefix, `"reasoning-delta","index":`...)
	default:
		prefix = append(prefix, `"tool-call-delta","index":`...)
	}
	prefix = append(prefix, d.Index.String()...)
	if typ != rowToolCallChunks {
		return append(prefix, `,"text":`...)
	}
	prefix = append(prefix, `,"id":`...)
	prefix = appendJSString(prefix, *d.ID)
	if d.Name != nil {
		prefix = append(prefix, `,"name":`...)
		prefix = appendJSString(prefix, *d.Name)
	}
	return append(prefix, `,"argumentsDelta":`...)
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
