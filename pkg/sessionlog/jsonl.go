package sessionlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// FormatVersion is the harness's SESSION_FORMAT_VERSION; any other version is refused.
const FormatVersion = 0

// Header is the first line of a harness session JSONL file, with its fields in the order the
// harness writes them. The store keeps id, createdAt, parentSession and seedLength; cwd,
// origin and agentPreset are accepted on import and dropped, and delegationDepth is written
// as 0 (the harness refuses a header without it).
type Header struct {
	Type            string `json:"type"`
	Version         int    `json:"version"`
	ID              string `json:"id"`
	CreatedAt       int64  `json:"createdAt"`
	Cwd             string `json:"cwd,omitempty"`
	ParentSession   string `json:"parentSession,omitempty"`
	SeedLength      *int64 `json:"seedLength,omitempty"`
	Origin          string `json:"origin,omitempty"`
	DelegationDepth int64  `json:"delegationDepth"`
	AgentPreset     string `json:"agentPreset,omitempty"`
}

// ExportOptions adjusts ExportJSONL.
type ExportOptions struct {
	// Cwd is the header's cwd: the working directory of the agent that resumes the log. The
	// harness files a session under its cwd and resolves relative paths against it; the store
	// keeps none, so without it the header has no cwd (the harness files it under _no-cwd).
	Cwd string
}

// exportPage bounds how many events Export holds in memory at once.
const exportPage = 1000

// Export writes session sessionID as harness JSONL: the header line, then one event per line
// in envelope key order (type, seq, time, data, ignorable?, sourceEventSeqs?, surfaceOp?).
func Export(ctx context.Context, s Store, sessionID string, w io.Writer) error {
	return ExportJSONL(ctx, s, sessionID, w, ExportOptions{})
}

// ExportJSONL is Export with options. The output is plain (uncompressed, unpacked) JSONL,
// which the harness reads like its own compressed logs.
func ExportJSONL(ctx context.Context, s Store, sessionID string, w io.Writer, opts ExportOptions) error {
	info, err := s.Info(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("export session %q: %w", sessionID, err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	hdr := Header{Type: harness.TypeSessionHeader, Version: FormatVersion, ID: info.ID, CreatedAt: info.CreatedAt, Cwd: opts.Cwd, ParentSession: info.ParentSession}
	if info.ParentSession != "" || info.SeedLength != 0 {
		n := info.SeedLength
		hdr.SeedLength = &n
	}
	line, err := marshalNoEscape(hdr)
	if err != nil {
		return fmt.Errorf("export session %q: %w", sessionID, err)
	}
	_, _ = bw.Write(line)
	_ = bw.WriteByte('\n')
	for from := int64(0); ; {
		evs, err := s.ReadFrom(ctx, sessionID, from, exportPage)
		if err != nil {
			return fmt.Errorf("export session %q: %w", sessionID, err)
		}
		for i := range evs {
			// bufio.Writer keeps its first write error and Flush below returns it.
			_, _ = bw.Write(AppendJSONL(nil, &evs[i]))
		}
		if len(evs) < exportPage {
			break
		}
		from = evs[len(evs)-1].Seq + 1
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export session %q: write: %w", sessionID, err)
	}
	return nil
}

// AppendJSONL appends the event's JSONL line (with its newline) to dst. Data, surfaceOp and
// strings are written as stored: no HTML escaping, key order and numbers untouched.
func AppendJSONL(dst []byte, ev *harness.Event) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendString(dst, ev.Type)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, ev.Seq, 10)
	dst = append(dst, `,"time":`...)
	dst = strconv.AppendInt(dst, ev.Time, 10)
	dst = append(dst, `,"data":`...)
	dst = append(dst, ev.Data...)
	if ev.Ignorable {
		dst = append(dst, `,"ignorable":true`...)
	}
	if len(ev.SourceEventSeqs) > 0 {
		dst = append(dst, `,"sourceEventSeqs":[`...)
		for i, s := range ev.SourceEventSeqs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, s, 10)
		}
		dst = append(dst, ']')
	}
	if len(ev.SurfaceOp) > 0 {
		dst = append(dst, `,"surfaceOp":`...)
		dst = append(dst, ev.SurfaceOp...)
	}
	return append(dst, "}\n"...)
}

func appendString(dst []byte, s string) []byte {
	b, _ := marshalNoEscape(s)
	return append(dst, b...)
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ImportOptions adjusts Import.
type ImportOptions struct {
	// SessionID, when set, replaces the header's id.
	SessionID string
	// Owner, when set, is the AgentSession the imported log is recorded for (its UID may be
	// empty: the session's first claim records it). Unset: the log belongs to nobody until an
	// AgentSession claims it, and no namespace may fork it meanwhile. A log another session
	// owns is never imported into.
	Owner Owner
}

// ImportError locates a refused JSONL line.
type ImportError struct {
	Line int
	Err  error
}

func (e *ImportError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ImportError) Unwrap() error { return e.Err }

// Import reads a harness log (a header line, then one event per line), plain or
// zstd-compressed (any number of frames), and creates the session with Seed: atomically, and
// only if it does not exist yet. Packed chunk rows are expanded into the assistant/chunk
// events they stand for, as the harness reads them. Event types this package does not know
// are stored verbatim, so a log of a newer harness imports and exports unchanged. It refuses
// a format version other than 0, unknown envelope fields, non-contiguous seqs and invalid
// payloads of the types plan mode reads, naming the line; nothing is stored then.
func Import(ctx context.Context, s Store, r io.Reader, opts ImportOptions) (SessionInfo, harness.Tail, error) {
	plain, closeDec, err := plainJSONL(r)
	if err != nil {
		return SessionInfo{}, harness.Tail{}, err
	}
	defer closeDec()
	br := bufio.NewReaderSize(plain, 64<<10)
	lineNo := 0
	var info SessionInfo
	var events []harness.Event
	var eventLines []int // line number of each event, for error messages
	haveHeader := false
	for {
		line, rerr := br.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return SessionInfo{}, harness.Tail{}, fmt.Errorf("import: read (line %d): %w", lineNo+1, rerr)
		}
		if len(line) > 0 {
			lineNo++
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if !haveHeader {
				h, err := parseHeader(t)
				if err != nil {
					return SessionInfo{}, harness.Tail{}, &ImportError{Line: lineNo, Err: err}
				}
				info = h
				if opts.SessionID != "" {
					info.ID = opts.SessionID
				}
				if info.ID == "" {
					return SessionInfo{}, harness.Tail{}, &ImportError{Line: lineNo, Err: errors.New(`session header has no "id"; pass a session id`)}
				}
				haveHeader = true
			} else {
				evs, err := parseEventLine(t, int64(len(events)))
				if err != nil {
					return SessionInfo{}, harness.Tail{}, &ImportError{Line: lineNo, Err: err}
				}
				for _, ev := range evs {
					events = append(events, ev)
					eventLines = append(eventLines, lineNo)
				}
			}
		}
		if rerr != nil {
			break
		}
	}
	if !haveHeader {
		return SessionInfo{}, harness.Tail{}, errors.New(`import: empty input; expected a {"type":"session","version":0,...} header line`)
	}
	tail, err := s.Seed(ctx, info, events, opts.Owner)
	if err != nil {
		var v *ValidationError
		if errors.As(err, &v) && v.Seq >= 0 && v.Seq < int64(len(eventLines)) {
			return SessionInfo{}, harness.Tail{}, &ImportError{Line: eventLines[v.Seq], Err: err}
		}
		var c *ConflictError
		if errors.As(err, &c) {
			return SessionInfo{}, harness.Tail{}, fmt.Errorf("import session %q: it already exists with %d events; choose another id (--session): %w", info.ID, c.Expected, err)
		}
		return SessionInfo{}, harness.Tail{}, fmt.Errorf("import session %q: %w", info.ID, err)
	}
	return info, tail, nil
}

func parseHeader(line []byte) (SessionInfo, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return SessionInfo{}, fmt.Errorf("session header is not a JSON object: %v", err)
	}
	var typ string
	if err := json.Unmarshal(m["type"], &typ); err != nil || typ != harness.TypeSessionHeader {
		return SessionInfo{}, fmt.Errorf(`first line must be the session header {"type":"session",...}; got type %s`, harness.JSONText(m["type"]))
	}
	vraw, ok := m["version"]
	if !ok {
		return SessionInfo{}, errors.New(`session header has no "version"; expected 0`)
	}
	if string(bytes.TrimSpace(vraw)) != "0" {
		// The harness's SessionFormatUnsupportedError.
		return SessionInfo{}, fmt.Errorf("unsupported session format version %s; only version %d is supported", harness.JSONText(vraw), FormatVersion)
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return SessionInfo{}, fmt.Errorf("session header: %v", err)
	}
	info := SessionInfo{ID: h.ID, CreatedAt: h.CreatedAt, ParentSession: h.ParentSession}
	if h.SeedLength != nil {
		info.SeedLength = *h.SeedLength
	}
	return info, nil
}

// The envelope's fields, as named in a JSONL line and in a ValidationError.
const (
	fieldType            = "type"
	fieldSeq             = "seq"
	fieldTime            = "time"
	fieldData            = "data"
	fieldIgnorable       = "ignorable"
	fieldSourceEventSeqs = "sourceEventSeqs"
	fieldSurfaceOp       = "surfaceOp"
)

var envelopeFields = map[string]bool{
	fieldType: true, fieldSeq: true, fieldTime: true, fieldData: true,
	fieldIgnorable: true, fieldSourceEventSeqs: true, fieldSurfaceOp: true,
}

var packedChunkTypes = map[string]bool{rowTextChunks: true, rowReasoningChunks: true, rowToolCallChunks: true}

// parseEventLine parses one line of an imported JSONL file into the events it stores (one, or
// the members of a packed chunk row); wantSeq is the seq the first must carry.
func parseEventLine(line []byte, wantSeq int64) ([]harness.Event, error) {
	m, typ, err := parseEnvelope(line)
	if err != nil {
		return nil, err
	}
	if packedChunkTypes[typ] {
		evs, err := expandChunkRow(line, typ)
		if err != nil {
			return nil, err
		}
		if evs[0].Seq != wantSeq {
			return nil, fmt.Errorf("%s storage row starts at seq %d; expected %d (seqs are contiguous from 0)", typ, evs[0].Seq, wantSeq)
		}
		return evs, nil
	}
	ev, err := parseEvent(m, typ, wantSeq)
	if err != nil {
		return nil, err
	}
	return []harness.Event{ev}, nil
}

// parseEvent reads one event's envelope fields.
func parseEvent(m map[string]json.RawMessage, typ string, wantSeq int64) (harness.Event, error) {
	ev := harness.Event{Type: typ, Data: m[fieldData]}
	if err := json.Unmarshal(m[fieldSeq], &ev.Seq); err != nil {
		return harness.Event{}, fmt.Errorf("%s event seq is %s; expected an integer", ev.Type, harness.JSONText(m[fieldSeq]))
	}
	if ev.Seq != wantSeq {
		return harness.Event{}, fmt.Errorf("%s event has seq %d; expected %d (seqs are contiguous from 0)", ev.Type, ev.Seq, wantSeq)
	}
	if err := json.Unmarshal(m[fieldTime], &ev.Time); err != nil || ev.Time <= 0 {
		return harness.Event{}, fmt.Errorf("%s event at seq %d has time %s; expected Unix epoch milliseconds", ev.Type, ev.Seq, harness.JSONText(m[fieldTime]))
	}
	if raw, ok := m[fieldIgnorable]; ok {
		if string(bytes.TrimSpace(raw)) != "true" {
			return harness.Event{}, fmt.Errorf("%s event at seq %d has ignorable %s; only true is allowed", ev.Type, ev.Seq, harness.JSONText(raw))
		}
		ev.Ignorable = true
	}
	if raw, ok := m[fieldSourceEventSeqs]; ok {
		if err := json.Unmarshal(raw, &ev.SourceEventSeqs); err != nil || len(ev.SourceEventSeqs) == 0 {
			return harness.Event{}, fmt.Errorf("%s event at seq %d has sourceEventSeqs %s; expected a non-empty array of integers", ev.Type, ev.Seq, harness.JSONText(raw))
		}
	}
	if raw, ok := m[fieldSurfaceOp]; ok {
		ev.SurfaceOp = raw
	}
	return ev, nil
}

// parseEnvelope splits an event line into its envelope fields and returns its type, refusing
// a line that is not an object, a legacy header delta, and an envelope with a field missing
// or unknown. A packed chunk row is returned as it is.
func parseEnvelope(line []byte) (map[string]json.RawMessage, string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, "", fmt.Errorf("event is not a JSON object: %v", err)
	}
	var typ string
	if raw, ok := m[fieldType]; ok {
		if err := json.Unmarshal(raw, &typ); err != nil {
			return nil, "", fmt.Errorf("event type is %s; expected a string", harness.JSONText(raw))
		}
	}
	if packedChunkTypes[typ] {
		return m, typ, nil // validated by expandChunkRow
	}
	for _, k := range []string{fieldType, fieldSeq, fieldTime, fieldData} {
		if _, ok := m[k]; !ok {
			return nil, "", fmt.Errorf("event has no %q; the envelope is {type, seq, time, data}", k)
		}
	}
	if typ == harness.TypeLegacyHeaderDelta {
		return nil, "", errors.New("legacy request/header-delta events are refused (the harness refuses them too)")
	}
	for k := range m {
		if !envelopeFields[k] {
			return nil, "", fmt.Errorf("%s event has unknown envelope field %q", typ, k)
		}
	}
	return m, typ, nil
}
