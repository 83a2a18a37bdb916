package harness

import (
	"encoding/json"
	"testing"
)

// The payloads are byte-compatible with the harness: createUserMessage's key order, the plan
// mode notice's plugin source, surfaceOp "append" on surface events.
func TestPayloadBytes(t *testing.T) {
	const sha = "6c1f8b3bd5d6e8e9b0a1f2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5061"
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
		// /plan TEXT with an image: the image block (ImageAttachmentRef's key order) before the text.
		{string(MustEvent(TypeUserMessage, NewUserImages("m2", "like this", []ImageRef{{AttachmentID: "sha256:" + sha, MediaType: "image/png", Width: 2, Height: 3, Bytes: 70, Name: "a.png"}})).Data),
			`{"content":[{"type":"image","attachment":{"attachmentId":"sha256:` + sha + `","mediaType":"image/png","width":2,"height":3,"bytes":70,"name":"a.png"}},` +
				`{"type":"text","text":"like this"}],"source":{"kind":"user"},"role":"user","id":"m2"}`},
		// Bare /plan with an image: an image-only message.
		{string(MustEvent(TypeUserMessage, NewUserImages("m3", "", []ImageRef{{AttachmentID: "sha256:" + sha, MediaType: "image/gif", Width: 1, Height: 1, Bytes: 9}})).Data),
			`{"content":[{"type":"image","attachment":{"attachmentId":"sha256:` + sha + `","mediaType":"image/gif","width":1,"height":1,"bytes":9}}],` +
				`"source":{"kind":"user"},"role":"user","id":"m3"}`},
		// A text block keeps an empty text.
		{mustJSON(t, ContentBlock{Type: ContentTypeText}), `{"type":"text","text":""}`},
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

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A logged message's blocks read back as they were written, image and text alike.
func TestContentBlockRoundTrip(t *testing.T) {
	in := NewUserImages("m", "see", []ImageRef{{AttachmentID: "sha256:ab", MediaType: "image/webp", Width: 5, Height: 6, Bytes: 7}})
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out UserMessage
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Content) != 2 || out.Content[0].Attachment == nil || *out.Content[0].Attachment != *in.Content[0].Attachment || out.Content[1].Text != "see" {
		t.Fatalf("round trip: %+v", out.Content)
	}
}
