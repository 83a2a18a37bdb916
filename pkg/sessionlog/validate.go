package sessionlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrNotFound is returned (wrapped) by Info for a session that has no header.
var ErrNotFound = errors.New("session not found")

// ValidationError is returned by Append (and Seed) when an event of the batch is malformed;
// nothing of the batch is written. Field is a JSON path inside the event ("data.active").
type ValidationError struct {
	SessionID string
	Seq       int64
	Type      string
	Field     string
	Message   string
}

func (e *ValidationError) Error() string {
	where := fmt.Sprintf("session %q seq %d", e.SessionID, e.Seq)
	if e.Type != "" {
		where += " (" + e.Type + ")"
	}
	if e.Field != "" {
		where += " field " + e.Field
	}
	return "invalid event: " + where + ": " + e.Message
}

// CorruptError reports a stored event that cannot be read back as a valid event (bad JSON,
// an invalid typed payload, a missing seq). Reads never skip such a row.
type CorruptError struct {
	SessionID string
	Seq       int64
	Reason    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("session %q seq %d: stored event is corrupt: %s", e.SessionID, e.Seq, e.Reason)
}

// IsCorrupt reports whether err is (or wraps) a *CorruptError.
func IsCorrupt(err error) bool {
	var c *CorruptError
	return errors.As(err, &c)
}

// IsInvalid reports whether err is (or wraps) a *ValidationError.
func IsInvalid(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

// facts is what the tail fold needs from one event's data, extracted while validating.
type facts struct {
	turn, step int64
	active     bool
}

// jsonText renders a raw JSON value the way JavaScript's JSON.stringify would print it in the
// harness's messages; a missing value renders as undefined.
func jsonText(raw json.RawMessage, present bool) string {
	if !present {
		return "undefined"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// object decodes raw as a JSON object; ok is false when it is not one.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return nil, false
	}
	return m, true
}

func kindOf(raw json.RawMessage) byte {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return 0
	}
	switch t[0] {
	case '{', '[', '"':
		return t[0]
	case 't', 'f':
		return 'b'
	case 'n':
		return 'n'
	default:
		return '0'
	}
}

// checker collects the first problem found in one event.
type checker struct {
	sessionID string
	ev        *Event
}

func (c checker) fail(field, format string, args ...any) *ValidationError {
	return &ValidationError{SessionID: c.sessionID, Seq: c.ev.Seq, Type: c.ev.Type, Field: field, Message: fmt.Sprintf(format, args...)}
}

// integer reads data.<key> as a non-negative integer.
func (c checker) integer(m map[string]json.RawMessage, key string) (int64, *ValidationError) {
	raw, ok := m[key]
	if !ok {
		return 0, c.fail("data."+key, "%s is missing; expected a non-negative integer", key)
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || n < 0 {
		return 0, c.fail("data."+key, "%s is %s; expected a non-negative integer", key, jsonText(raw, true))
	}
	return n, nil
}

// str reads data.<key> as a string; required strings must also be non-empty.
func (c checker) str(m map[string]json.RawMessage, key string, required bool) (string, *ValidationError) {
	raw, ok := m[key]
	if !ok {
		if required {
			return "", c.fail("data."+key, "%s is missing; expected a non-empty string", key)
		}
		return "", nil
	}
	var s string
	if kindOf(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", c.fail("data."+key, "%s is %s; expected a string", key, jsonText(raw, true))
	}
	if required && s == "" {
		return "", c.fail("data."+key, "%s is empty; expected a non-empty string", key)
	}
	return s, nil
}

// kinded checks that data.<key> is an object with a non-empty string "kind".
func (c checker) kinded(m map[string]json.RawMessage, key string) *ValidationError {
	raw, ok := m[key]
	if !ok {
		return c.fail("data."+key, "%s is missing; expected an object with a string kind", key)
	}
	o, isObj := object(raw)
	if !isObj {
		return c.fail("data."+key, "%s is %s; expected an object with a string kind", key, jsonText(raw, true))
	}
	var kind string
	if k, ok := o["kind"]; !ok || json.Unmarshal(k, &kind) != nil || kind == "" {
		return c.fail("data."+key+".kind", "%s.kind is %s; expected a non-empty string", key, jsonText(o["kind"], ok))
	}
	return nil
}

// checkEvent validates one event's envelope and, for the types plan mode reads or writes, its
// payload. It returns the facts the tail fold needs.
func checkEvent(sessionID string, ev *Event) (facts, *ValidationError) {
	c := checker{sessionID: sessionID, ev: ev}
	var f facts
	if ev.Type == "" {
		return f, c.fail("type", "type is empty; every event needs a type such as %q", TypePlanMode)
	}
	if ev.Type == "session" {
		return f, c.fail("type", `type "session" is reserved for the JSONL header line`)
	}
	if ev.Seq < 0 {
		return f, c.fail("seq", "seq is %d; seqs are contiguous from 0", ev.Seq)
	}
	if ev.Time < 0 {
		return f, c.fail("time", "time is %d; expected Unix epoch milliseconds", ev.Time)
	}
	if len(bytes.TrimSpace(ev.Data)) == 0 {
		return f, c.fail("data", "data is missing; every event carries a JSON value (use {} for none)")
	}
	if !json.Valid(ev.Data) {
		return f, c.fail("data", "data is not valid JSON")
	}
	if off := negativeZero(ev.Data); off >= 0 {
		// JSON.parse would turn it into -0, which the harness refuses as not lossless JSON.
		return f, c.fail("data", "data has a negative zero (-0) at byte %d; the harness accepts only lossless JSON", off)
	}
	if !utf8.Valid(ev.Data) {
		// JSON text is UTF-8 (RFC 8259); PostgreSQL's text would refuse it anyway.
		return f, c.fail("data", "data is not valid UTF-8")
	}
	if len(ev.SurfaceOp) > 0 {
		if err := checkSurfaceOp(ev.SurfaceOp); err != "" {
			return f, c.fail("surfaceOp", "%s", err)
		}
	}
	switch ev.Type {
	case TypePlanMode:
		m, isObj := object(ev.Data)
		raw, present := m["active"]
		if !isObj || !present || (kindOf(raw) != 'b') {
			// The harness's own wording (plan-mode index.ts foldPlanMode/validation).
			return f, c.fail("data.active", "plan/mode carries invalid active state %s; expected a boolean", jsonText(raw, present))
		}
		for k := range m {
			if k != "active" {
				return f, c.fail("data."+k, `plan/mode carries unexpected field %q; data must be exactly {"active": boolean}`, k)
			}
		}
		f.active = bytes.Equal(bytes.TrimSpace(raw), []byte("true"))
	case TypeTurnStart, TypeTurnEnd, TypeStepStart, TypeStepEnd, TypeRequestHeader, TypeUserMessage, TypeCommandRun, TypeCommandDone:
		m, isObj := object(ev.Data)
		if !isObj {
			return f, c.fail("data", "%s data is %s; expected an object", ev.Type, jsonText(ev.Data, true))
		}
		var verr *ValidationError
		switch ev.Type {
		case TypeTurnStart:
			f.turn, verr = c.integer(m, "turn")
		case TypeTurnEnd:
			if f.turn, verr = c.integer(m, "turn"); verr == nil {
				verr = c.kinded(m, "reason")
			}
		case TypeStepStart, TypeStepEnd:
			if f.turn, verr = c.integer(m, "turn"); verr == nil {
				f.step, verr = c.integer(m, "step")
			}
		case TypeRequestHeader:
			if raw, ok := m["header"]; !ok || kindOf(raw) != '{' {
				verr = c.fail("data.header", "header is %s; expected an object (the EpochHeader)", jsonText(raw, ok))
			} else {
				_, verr = c.str(m, "reason", true)
			}
		case TypeUserMessage:
			if raw, ok := m["content"]; !ok || (kindOf(raw) != '[' && kindOf(raw) != '"') {
				verr = c.fail("data.content", "content is %s; expected an array of content parts", jsonText(raw, ok))
			} else if verr = c.kinded(m, "source"); verr == nil {
				var role string
				if role, verr = c.str(m, "role", true); verr == nil && role != "user" {
					verr = c.fail("data.role", `role is %q; expected "user"`, role)
				}
				if verr == nil {
					_, verr = c.str(m, "id", true)
				}
			}
		case TypeCommandRun:
			if _, verr = c.str(m, "commandId", true); verr == nil {
				if _, verr = c.str(m, "name", true); verr == nil {
					if _, verr = c.str(m, "args", false); verr == nil {
						verr = c.kinded(m, "source")
					}
				}
			}
		case TypeCommandDone:
			var kind string
			if _, verr = c.str(m, "commandId", true); verr == nil {
				if kind, verr = c.str(m, "kind", true); verr == nil && kind != CommandSuccess && kind != CommandError {
					verr = c.fail("data.kind", `kind is %q; expected "success" or "error"`, kind)
				}
			}
			if verr == nil {
				_, verr = c.str(m, "text", false)
			}
			if verr == nil {
				if _, ok := m["sourceEventSeq"]; ok {
					_, verr = c.integer(m, "sourceEventSeq")
				}
			}
		}
		if verr != nil {
			return f, verr
		}
	}
	return f, nil
}

// checkSurfaceOp accepts "append" or {op:"replace", start, end}; it returns a problem or "".
func checkSurfaceOp(raw json.RawMessage) string {
	if kindOf(raw) == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil && s == "append" {
			return ""
		}
	}
	if m, ok := object(raw); ok {
		var op string
		var start, end int64
		if json.Unmarshal(m["op"], &op) == nil && op == "replace" &&
			json.Unmarshal(m["start"], &start) == nil && json.Unmarshal(m["end"], &end) == nil {
			return ""
		}
	}
	return fmt.Sprintf(`surfaceOp is %s; expected "append" or {"op":"replace","start":n,"end":n}`, jsonText(raw, true))
}

// prepared is a validated batch: the events with data compacted and time filled, and the
// facts the fold needs.
type prepared struct {
	events []Event
	facts  []facts
}

// prepareBatch validates a batch before anything is written: every event valid, seqs
// contiguous. It copies the events, compacts data and fills a zero time with now.
func prepareBatch(sessionID string, events []Event) (prepared, error) {
	if sessionID == "" {
		return prepared{}, errors.New("session id is empty")
	}
	p := prepared{events: make([]Event, len(events)), facts: make([]facts, len(events))}
	now := nowMillis()
	for i := range events {
		ev := events[i]
		if i > 0 && ev.Seq != events[0].Seq+int64(i) {
			return prepared{}, &ValidationError{SessionID: sessionID, Seq: ev.Seq, Type: ev.Type, Field: "seq",
				Message: fmt.Sprintf("seq %d does not continue the batch (expected %d); seqs must be contiguous", ev.Seq, events[0].Seq+int64(i))}
		}
		f, verr := checkEvent(sessionID, &ev)
		if verr != nil {
			return prepared{}, verr
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, ev.Data); err != nil {
			return prepared{}, &ValidationError{SessionID: sessionID, Seq: ev.Seq, Type: ev.Type, Field: "data", Message: "data is not valid JSON"}
		}
		ev.Data = buf.Bytes()
		if len(ev.SurfaceOp) > 0 {
			var sb bytes.Buffer
			_ = json.Compact(&sb, ev.SurfaceOp)
			ev.SurfaceOp = sb.Bytes()
		}
		if ev.Time == 0 {
			ev.Time = now
		}
		p.events[i] = ev
		p.facts[i] = f
	}
	return p, nil
}

// checkStored re-validates an event read back from storage; a failure is corruption.
func checkStored(sessionID string, ev *Event) error {
	if _, verr := checkEvent(sessionID, ev); verr != nil {
		field := ""
		if verr.Field != "" {
			field = verr.Field + ": "
		}
		return &CorruptError{SessionID: sessionID, Seq: ev.Seq, Reason: field + verr.Message}
	}
	return nil
}

// negativeZero returns the offset of a number literal in valid JSON text whose value is -0
// (-0, -0.0, -0e5, ...), or -1.
func negativeZero(data []byte) int {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			// A whole number token: sign, mantissa, optional exponent.
			j := i
			zero := true
			for ; j < len(data) && strings.IndexByte("-+0123456789.eE", data[j]) >= 0; j++ {
				if data[j] == 'e' || data[j] == 'E' {
					for j < len(data) && strings.IndexByte("-+0123456789.eE", data[j]) >= 0 {
						j++
					}
					break
				}
				if data[j] >= '1' && data[j] <= '9' {
					zero = false
				}
			}
			if c == '-' && zero {
				return i
			}
			i = j - 1
		}
	}
	return -1
}
