package agentsdk

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// The payloads are byte-compatible with the harness: key order of
// createUserMessage, the plugin source of the notice, surfaceOp "append" on surface events.
func TestEventShapes(t *testing.T) {
	n := Notice(harness.NoticePlanOn)
	var m harness.UserMessage
	if err := json.Unmarshal(n.Data, &m); err != nil {
		t.Fatal(err)
	}
	if !uuidV4.MatchString(m.ID) {
		t.Errorf("notice id %q is not a UUID v4", m.ID)
	}
	want := `{"content":[{"type":"text","text":"The user switched this session to plan mode."}],` +
		`"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"The user switched this session to plan mode."},` +
		`"role":"user","id":"` + m.ID + `"}`
	if string(n.Data) != want {
		t.Errorf("notice data\n got %s\nwant %s", n.Data, want)
	}
	if n.Type != "user/message" || string(n.SurfaceOp) != `"append"` {
		t.Errorf("notice envelope: type %q surfaceOp %s", n.Type, n.SurfaceOp)
	}
	u := UserText("draft it")
	if !strings.HasPrefix(string(u.Data), `{"content":[{"type":"text","text":"draft it"}],"source":{"kind":"user"},"role":"user","id":"`) {
		t.Errorf("user message data %s", u.Data)
	}
	for _, tc := range []struct {
		got  string
		want string
	}{
		{string(TurnStart(3).Data), `{"turn":3}`},
		{string(StepStart(3, 2).Data), `{"turn":3,"step":2}`},
		{string(StepEnd(3, 2).Data), `{"turn":3,"step":2}`},
		{string(TurnEnd(3, harness.TurnCompleted).Data), `{"turn":3,"reason":{"kind":"completed"}}`},
		{string(TurnEnd(3, harness.TurnBlocked("log store: down")).Data), `{"turn":3,"reason":{"kind":"blocked","message":"log store: down"}}`},
		{string(RequestHeader(harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "s"}, harness.HeaderReasonInitial).Data),
			`{"header":{"config":{"provider":"p","model":"m"},"system":"s"},"reason":"initial"}`},
		{string(ToolCall(1, 2, "c1", "read", `{}`).Data), `{"turn":1,"step":2,"callId":"c1","name":"read","arguments":"{}"}`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

func TestHeaderTracker(t *testing.T) {
	var h HeaderTracker
	a := harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "a"}
	ev, ok := h.Next(a, false)
	if !ok || !strings.Contains(string(ev.Data), `"reason":"initial"`) {
		t.Fatalf("first header: ok=%v %s", ok, ev.Data)
	}
	// Not committed (the append failed): the next request is still the first.
	if ev, ok = h.Next(a, false); !ok || !strings.Contains(string(ev.Data), `"reason":"initial"`) {
		t.Fatalf("uncommitted first header: ok=%v %s", ok, ev.Data)
	}
	h.Commit()
	if _, ok = h.Next(a, false); ok {
		t.Fatal("an unchanged header was logged again")
	}
	b := a
	b.System = "b"
	if ev, ok = h.Next(b, false); !ok || !strings.Contains(string(ev.Data), `"reason":"change"`) {
		t.Fatalf("changed header: ok=%v %s", ok, ev.Data)
	}
	var r HeaderTracker
	if ev, ok = r.Next(a, true); !ok || !strings.Contains(string(ev.Data), `"reason":"resume"`) {
		t.Fatalf("resumed header: ok=%v %s", ok, ev.Data)
	}
}

// A tool/result is the harness's: message {source:{kind:'tool',callId}, content:[{type:
// 'tool-result', toolCallId, content, isError}], role:'user', id}, surfaceOp "append", and
// sourceEventSeqs naming its tool/call when both are appended in one batch.
func TestToolResultShape(t *testing.T) {
	res := ExitResult{Approved: true, Text: harness.ExitApprovedText}
	evs, err := ExitToolEvents(1, 2, "call_2", `{"plan":"# Plan"}`, res, nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := Sequence(34, evs...)
	call, result := batch[0], batch[1]
	if call.Seq != 34 || result.Seq != 35 || len(result.SourceEventSeqs) != 1 || result.SourceEventSeqs[0] != 34 {
		t.Fatalf("seqs: call %d, result %d, result sourceEventSeqs %v", call.Seq, result.Seq, result.SourceEventSeqs)
	}
	var d harness.ToolResult
	if err := json.Unmarshal(result.Data, &d); err != nil {
		t.Fatal(err)
	}
	want := `{"turn":1,"step":2,"message":{"source":{"kind":"tool","callId":"call_2"},"content":[{"type":"tool-result","toolCallId":"call_2",` +
		`"content":[{"type":"text","text":"` + harness.ExitApprovedText + `"}],"isError":false}],"role":"user","id":"` + d.Message.ID + `"}}`
	if string(result.Data) != want || !uuidV4.MatchString(d.Message.ID) {
		t.Errorf("tool/result data\n got %s\nwant %s", result.Data, want)
	}
	if string(result.SurfaceOp) != `"append"` || len(call.SurfaceOp) != 0 {
		t.Errorf("surfaceOp: result %s, call %s", result.SurfaceOp, call.SurfaceOp)
	}
	// The original events stay unnumbered, so a re-sequenced retry links to the new seq.
	if len(evs[1].SourceEventSeqs) != 0 || Sequence(40, evs...)[1].SourceEventSeqs[0] != 40 {
		t.Error("Sequence changed its input or did not relink the result")
	}
	// A result appended after its call's batch names the call with AnswerTo.
	if r := AnswerTo(ToolResult(1, 2, "call_9", "read", "ok", false), 12); Sequence(20, r)[0].SourceEventSeqs[0] != 12 {
		t.Error("AnswerTo's call seq was lost")
	}
}
