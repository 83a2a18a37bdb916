package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// InvalidEventError says why an event is not valid: which field (a JSON path inside the
// event, such as "data.active") and what is wrong with it, in the harness's wording where the
// harness has one.
type InvalidEventError struct {
	Seq     int64
	Type    string
	Field   string
	Message string
}

func (e *InvalidEventError) Error() string {
	where := fmt.Sprintf("seq %d", e.Seq)
	if e.Type != "" {
		where += " (" + e.Type + ")"
	}
	if e.Field != "" {
		where += " field " + e.Field
	}
	return "invalid event: " + where + ": " + e.Message
}

// Facts is what the Tail fold reads from one event's data. Check extracts it while
// validating, so a store parses each payload once on the append path.
type Facts struct {
	turn, step int64
	active     bool
}

// Check validates one event's envelope (a type, non-negative seq and time, lossless JSON data,
// a valid surfaceOp) and, for the types plan mode reads or writes, its payload. Any other type
// is valid with any JSON data. It returns the facts Tail.Apply needs, or an
// *InvalidEventError.
func Check(ev *Event) (Facts, error) {
	f, verr := check(ev)
	if verr != nil {
		return Facts{}, verr
	}
	return f, nil
}

// DecodePlanMode reads a plan/mode payload strictly: exactly {active: bool}.
func DecodePlanMode(data json.RawMessage) (bool, error) {
	active, _, msg := planModeRule(data)
	if msg != "" {
		return false, errors.New(msg)
	}
	return active, nil
}

// planModeRule is what makes a plan/mode payload valid; on failure it returns the field and
// the harness's message.
func planModeRule(data json.RawMessage) (active bool, field, msg string) {
	m, isObj := object(data)
	raw, present := m["active"]
	if !isObj || !present || kindOf(raw) != 'b' {
		if !present {
			raw = nil
		}
		return false, "data.active", fmt.Sprintf("plan/mode carries invalid active state %s; expected a boolean", JSONText(raw))
	}
	for k := range m {
		if k != "active" {
			return false, "data." + k, fmt.Sprintf(`plan/mode carries unexpected field %q; data must be exactly {"active": boolean}`, k)
		}
	}
	return bytes.Equal(bytes.TrimSpace(raw), []byte("true")), "", ""
}

// JSONText renders a raw JSON value the way the harness's messages print one (JavaScript's
// JSON.stringify): compacted, and undefined for a missing (nil) value.
func JSONText(raw json.RawMessage) string {
	if raw == nil {
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

// kindOf classifies a raw JSON value by its first byte: '{', '[', '"', 'b' (boolean), 'n'
// (null), '0' (number), or 0 when empty.
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
	ev *Event
}

func (c checker) fail(field, format string, args ...any) *InvalidEventError {
	return &InvalidEventError{Seq: c.ev.Seq, Type: c.ev.Type, Field: field, Message: fmt.Sprintf(format, args...)}
}

// integer reads data.<key> as a non-negative integer.
func (c checker) integer(m map[string]json.RawMessage, key string) (int64, *InvalidEventError) {
	raw, ok := m[key]
	if !ok {
		return 0, c.fail("data."+key, "%s is missing; expected a non-negative integer", key)
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || n < 0 {
		return 0, c.fail("data."+key, "%s is %s; expected a non-negative integer", key, JSONText(raw))
	}
	return n, nil
}

// str reads data.<key> as a string; required strings must also be non-empty.
func (c checker) str(m map[string]json.RawMessage, key string, required bool) (string, *InvalidEventError) {
	raw, ok := m[key]
	if !ok {
		if required {
			return "", c.fail("data."+key, "%s is missing; expected a non-empty string", key)
		}
		return "", nil
	}
	var s string
	if kindOf(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", c.fail("data."+key, "%s is %s; expected a string", key, JSONText(raw))
	}
	if required && s == "" {
		return "", c.fail("data."+key, "%s is empty; expected a non-empty string", key)
	}
	return s, nil
}

// kinded checks that data.<key> is an object with a non-empty string "kind".
func (c checker) kinded(m map[string]json.RawMessage, key string) *InvalidEventError {
	raw, ok := m[key]
	if !ok {
		return c.fail("data."+key, "%s is missing; expected an object with a string kind", key)
	}
	o, isObj := object(raw)
	if !isObj {
		return c.fail("data."+key, "%s is %s; expected an object with a string kind", key, JSONText(raw))
	}
	var kind string
	if k, ok := o["kind"]; !ok || json.Unmarshal(k, &kind) != nil || kind == "" {
		return c.fail("data."+key+".kind", "%s.kind is %s; expected a non-empty string", key, JSONText(o["kind"]))
	}
	return nil
}

func check(ev *Event) (Facts, *InvalidEventError) {
	c := checker{ev: ev}
	var f Facts
	if verr := c.envelope(); verr != nil {
		return f, verr
	}
	switch ev.Type {
	case TypePlanMode:
		active, field, msg := planModeRule(ev.Data)
		if msg != "" {
			return f, c.fail(field, "%s", msg)
		}
		f.active = active
	case TypeTurnStart, TypeTurnEnd, TypeStepStart, TypeStepEnd, TypeRequestHeader, TypeUserMessage, TypeCommandRun, TypeCommandDone:
		m, isObj := object(ev.Data)
		if !isObj {
			return f, c.fail("data", "%s data is %s; expected an object", ev.Type, JSONText(ev.Data))
		}
		var verr *InvalidEventError
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
			verr = c.requestHeader(m)
		case TypeUserMessage:
			verr = c.userMessage(m)
		case TypeCommandRun:
			verr = c.commandRun(m)
		case TypeCommandDone:
			verr = c.commandDone(m)
		}
		if verr != nil {
			return f, verr
		}
	}
	return f, nil
}

// envelope checks what every event needs, whatever its type.
func (c checker) envelope() *InvalidEventError {
	ev := c.ev
	switch {
	case ev.Type == "":
		return c.fail("type", "type is empty; every event needs a type such as %q", TypePlanMode)
	case ev.Type == TypeSessionHeader:
		return c.fail("type", `type %q is reserved for the JSONL header line`, TypeSessionHeader)
	case ev.Seq < 0:
		return c.fail("seq", "seq is %d; seqs are contiguous from 0", ev.Seq)
	case ev.Time < 0:
		return c.fail("time", "time is %d; expected Unix epoch milliseconds", ev.Time)
	case len(bytes.TrimSpace(ev.Data)) == 0:
		return c.fail("data", "data is missing; every event carries a JSON value (use {} for none)")
	case !json.Valid(ev.Data):
		return c.fail("data", "data is not valid JSON")
	}
	if off := negativeZero(ev.Data); off >= 0 {
		// JSON.parse would turn it into -0, which the harness refuses as not lossless JSON.
		return c.fail("data", "data has a negative zero (-0) at byte %d; the harness accepts only lossless JSON", off)
	}
	if !utf8.Valid(ev.Data) {
		// JSON text is UTF-8 (RFC 8259); PostgreSQL's text would refuse it anyway.
		return c.fail("data", "data is not valid UTF-8")
	}
	if len(ev.SurfaceOp) > 0 {
		if err := checkSurfaceOp(ev.SurfaceOp); err != "" {
			return c.fail("surfaceOp", "%s", err)
		}
	}
	return nil
}

func (c checker) requestHeader(m map[string]json.RawMessage) *InvalidEventError {
	if raw, ok := m["header"]; !ok || kindOf(raw) != '{' {
		return c.fail("data.header", "header is %s; expected an object (the EpochHeader)", JSONText(raw))
	}
	_, verr := c.str(m, "reason", true)
	return verr
}

func (c checker) userMessage(m map[string]json.RawMessage) *InvalidEventError {
	if raw, ok := m["content"]; !ok || (kindOf(raw) != '[' && kindOf(raw) != '"') {
		return c.fail("data.content", "content is %s; expected an array of content parts", JSONText(raw))
	}
	if verr := c.kinded(m, "source"); verr != nil {
		return verr
	}
	role, verr := c.str(m, "role", true)
	if verr != nil {
		return verr
	}
	if role != roleUser {
		return c.fail("data.role", `role is %q; expected "user"`, role)
	}
	_, verr = c.str(m, "id", true)
	return verr
}

func (c checker) commandRun(m map[string]json.RawMessage) *InvalidEventError {
	if _, verr := c.str(m, "commandId", true); verr != nil {
		return verr
	}
	if _, verr := c.str(m, "name", true); verr != nil {
		return verr
	}
	if _, verr := c.str(m, "args", false); verr != nil {
		return verr
	}
	return c.kinded(m, "source")
}

func (c checker) commandDone(m map[string]json.RawMessage) *InvalidEventError {
	if _, verr := c.str(m, "commandId", true); verr != nil {
		return verr
	}
	kind, verr := c.str(m, "kind", true)
	if verr != nil {
		return verr
	}
	if kind != CommandSuccess && kind != CommandError {
		return c.fail("data.kind", `kind is %q; expected "success" or "error"`, kind)
	}
	if _, verr := c.str(m, "text", false); verr != nil {
		return verr
	}
	if _, ok := m["sourceEventSeq"]; ok {
		_, verr = c.integer(m, "sourceEventSeq")
	}
	return verr
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
	return fmt.Sprintf(`surfaceOp is %s; expected "append" or {"op":"replace","start":n,"end":n}`, JSONText(raw))
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
