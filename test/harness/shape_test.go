package harness_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// A shape is the set of an event's JSON paths with the kind of value at each: envelope fields
// at the top ("seq": number, "sourceEventSeqs[]": number), data below ("data.message.role":
// string). Array elements share the path "[]". Two events have the same shape when the sets
// are equal: the same keys, nesting and value kinds, whatever the values. Values that are
// content rather than structure (a tool's JSON schema, a provider adapter's defaults) count as
// one opaque object.
type shape map[string]string

// opaquePaths hold content the event carries verbatim.
var opaquePaths = map[string]bool{"data.header.tools[].parameters": true, "data.header.adapterDefaults": true}

func shapeOf(ev harness.Event) shape {
	line := []byte(fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, ev.Type, ev.Seq, ev.Time, ev.Data))
	if ev.Ignorable {
		line = append(line, `,"ignorable":true`...)
	}
	if len(ev.SourceEventSeqs) > 0 {
		b, _ := json.Marshal(ev.SourceEventSeqs)
		line = append(line, `,"sourceEventSeqs":`...)
		line = append(line, b...)
	}
	if len(ev.SurfaceOp) > 0 {
		line = append(line, `,"surfaceOp":`...)
		line = append(line, ev.SurfaceOp...)
	}
	line = append(line, '}')
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		return shape{"!": err.Error()}
	}
	s := shape{}
	walkShape(s, "", v)
	return s
}

func walkShape(s shape, path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		s[path] = "object"
		if opaquePaths[path] {
			return
		}
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			walkShape(s, p, e)
		}
	case []any:
		s[path] = "array"
		for _, e := range x {
			walkShape(s, path+"[]", e)
		}
	case string:
		s[path] = "string"
	case float64:
		s[path] = "number"
	case bool:
		s[path] = "boolean"
	case nil:
		s[path] = "null"
	}
}

// diff lists the paths where two shapes differ ("+path kind": only in b, "-path kind": only
// in a, "~path a->b": another kind).
func (a shape) diff(b shape) []string {
	var out []string
	for p, k := range a {
		if bk, ok := b[p]; !ok {
			out = append(out, fmt.Sprintf("-%s %s", p, k))
		} else if bk != k {
			out = append(out, fmt.Sprintf("~%s %s->%s", p, k, bk))
		}
	}
	for p, k := range b {
		if _, ok := a[p]; !ok {
			out = append(out, fmt.Sprintf("+%s %s", p, k))
		}
	}
	sort.Strings(out)
	return out
}

// variant names an event's type and the case of it whose shape is fixed: a user/message by
// its source, a turn/end by its reason, a tool/result by the tool it answers, a
// request/header by its reason.
func variant(ev harness.Event, toolOf map[int64]string) string {
	var d struct {
		Source struct{ Kind, Form string } `json:"source"`
		Reason json.RawMessage             `json:"reason"`
	}
	_ = json.Unmarshal(ev.Data, &d)
	switch ev.Type {
	case harness.TypeUserMessage:
		return ev.Type + ":" + strings.TrimSuffix(d.Source.Kind+":"+d.Source.Form, ":")
	case harness.TypeTurnEnd:
		var r struct{ Kind string }
		_ = json.Unmarshal(d.Reason, &r)
		return ev.Type + ":" + r.Kind
	case harness.TypeRequestHeader:
		var r string
		_ = json.Unmarshal(d.Reason, &r)
		return ev.Type + ":" + r
	case harness.TypeToolResult:
		if len(ev.SourceEventSeqs) == 1 {
			return ev.Type + ":" + toolOf[ev.SourceEventSeqs[0]]
		}
		return ev.Type + ":?"
	}
	return ev.Type
}

// toolNames maps each tool/call's seq to the tool's name.
func toolNames(evs []harness.Event) map[int64]string {
	m := map[int64]string{}
	for _, ev := range evs {
		if ev.Type == harness.TypeToolCall {
			var c harness.ToolCall
			if ev.Decode(&c) == nil {
				m[ev.Seq] = c.Name
			}
		}
	}
	return m
}
