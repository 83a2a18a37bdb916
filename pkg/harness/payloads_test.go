package harness

import (
	"encoding/json"
	"testing"
)

// The payloads are byte-compatible with the harness: createUserMessage's key order, the plan
// mode notice's plugin source, surfaceOp "append" on surface events.
func TestPayloadBytes(t *testing.T) {
	n := MustEvent(TypeUserMessage, NewPluginNotice("n1", NoticeSourcePlugin, NoticePlanOn))
	want := `{"content":[{"type":"text","text":"The user switched this session to plan mode."}],` +
		`"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"The user switched this session to plan mode."},` +
		`"role":"user","id":"n1"}`
	if string(n.Data) != want || string(n.SurfaceOp) != `"append"` {
		t.Errorf("notice: data %s surfaceOp %s\nwant data %s", n.Data, n.SurfaceOp, want)
	}
	for _, tc := range []struct{ got, want string }{
		{string(MustEvent(TypeUserMessage, NewUserText("m1", "draft it")).Data), `{"content":[{"type":"text","text":"draft it"}],"source":{"kind":"user"},"role":"user","id":"m1"}`},
		{string(PlanModeEvent(4, true).Data), `{"active":true}`},
		{string(MustEvent(TypeTurnEnd, TurnEnd{Turn: 1, Reason: TurnEndReason{Kind: TurnEndAborted, Reason: &AbortCause{Kind: "hook", Reason: "policy"}}}).Data),
			`{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"hook","reason":"policy"}}}`},
		{string(MustEvent(TypeCommandRun, CommandRun{CommandID: "c1", Name: "plan", Args: new(" off"), Source: UserSource}).Data),
			`{"commandId":"c1","name":"plan","args":" off","source":{"kind":"user"}}`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	if ev := MustEvent(TypePlanMode, PlanMode{}); ev.SurfaceOp != nil {
		t.Errorf("plan/mode is log-only; surfaceOp %s", ev.SurfaceOp)
	}
}

func TestReadToolResult(t *testing.T) {
	for _, tc := range []struct {
		data string
		want ToolOutcome
		ok   bool
	}{
		{`{"turn":1,"step":2,"message":{"source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1",` +
			`"content":[{"type":"text","text":"Plan "},{"type":"text","text":"approved"}],"isError":false}],"role":"user","id":"m"},"meta":{"x":1}}`,
			ToolOutcome{CallID: "c1", Text: "Plan approved"}, true},
		{`{"message":{"source":{"kind":"tool","callId":"c2"},` +
			`"content":[{"type":"tool-result","toolCallId":"c2","content":[{"type":"text","text":"Error: no"}],"isError":true}],"role":"user","id":"m"}}`,
			ToolOutcome{CallID: "c2", Text: "Error: no", IsError: true}, true},
		// The shape earlier operator releases wrote.
		{`{"turn":1,"step":2,"message":{"role":"toolResult","callId":"c3","toolName":"exit_plan_mode","content":[{"type":"text","text":"ok"}],"isError":false}}`,
			ToolOutcome{CallID: "c3", ToolName: "exit_plan_mode", Text: "ok"}, true},
		{`{"message":{"content":"text"}}`, ToolOutcome{}, false},
		{`{"message":{"content":[{"type":"text","text":"x"}]}}`, ToolOutcome{}, false},
		{`[]`, ToolOutcome{}, false},
	} {
		got, ok := ReadToolResult(json.RawMessage(tc.data))
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %+v %v, want %+v %v", tc.data, got, ok, tc.want, tc.ok)
		}
	}
}
