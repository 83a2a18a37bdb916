package harness

import "testing"

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
