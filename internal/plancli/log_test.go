package plancli

import (
	"context"
	"encoding/json"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

func event(typ, data string) harness.Event {
	return harness.Event{Type: typ, Data: json.RawMessage(data)}
}

// Each plan-relevant event gets its one-line summary; the rest of the log is left out.
func TestSummarise(t *testing.T) {
	s := newSummariser("You are in plan mode.")
	for _, tc := range []struct {
		ev   harness.Event
		want string // "" when the event is left out
	}{
		{event("plan/mode", `{"active":true}`), "plan mode on (active=true)"},
		{event("plan/mode", `{"active":false}`), "plan mode off (active=false)"},
		{event("plan/mode", `{"active":"yes"}`), `invalid: {"active":"yes"}`},
		{event("turn/start", `{"turn":3}`), "turn 3"},
		{event("turn/end", `{"turn":3,"reason":{"kind":"interrupted"}}`), "turn 3 (interrupted)"},
		{event("turn/end", `{"turn":3}`), "turn 3 (-)"},
		{event("step/start", `{"turn":3,"step":2}`), "turn 3 step 2"},
		{event("step/end", `{"turn":3,"step":2}`), "turn 3 step 2"},
		// The plan state of a request is the log's own, from the plan/mode events before it.
		{event("plan/mode", `{"active":true}`), "plan mode on (active=true)"},
		{event("request/header", `{"reason":"change","header":{"system":"base\n\nYou are in plan mode.","tools":[{"name":"read"},{"name":"exit_plan_mode"}]}}`),
			"reason=change plan=on guidance=current config tools=[read,exit_plan_mode]"},
		// A plan-mode request without today's section may have carried an earlier config: not "no".
		{event("request/header", `{"reason":"initial","header":{"system":"base\n\nAn older guidance text.","tools":[]}}`),
			"reason=initial plan=on guidance=not the current config (an earlier one, or none) tools=[]"},
		{event("plan/mode", `{"active":false}`), "plan mode off (active=false)"},
		{event("request/header", `{"header":{}}`), "reason=- plan=off tools=[]"},
		{event("request/header", `{"reason":"change","header":{"system":"You are in plan mode."}}`), "reason=change plan=off guidance=present although plan mode is off tools=[]"},
		// Once a plan-off request has shown the prompt without guidance, what a plan-mode request
		// carries beyond it is the guidance in force then: an earlier config's, none, or today's.
		{event("request/header", `{"reason":"resume","header":{"system":"base\n\ncwd /w"}}`), "reason=resume plan=off tools=[]"},
		{event("plan/mode", `{"active":true}`), "plan mode on (active=true)"},
		{event("request/header", `{"reason":"change","header":{"system":"base\n\ncwd /w\n\nAn older guidance text.\n\nStay in it."}}`),
			`reason=change plan=on guidance=earlier config (sha256:3b987299, "An older guidance text. Stay in it.") tools=[]`},
		{event("request/header", `{"reason":"change","header":{"system":"base\n\ncwd /w"}}`), "reason=change plan=on guidance=none tools=[]"},
		{event("request/header", `{"reason":"change","header":{"system":"base\n\ncwd /w\n\nYou are in plan mode."}}`), "reason=change plan=on guidance=current config tools=[]"},
		{event("plan/mode", `{"active":false}`), "plan mode off (active=false)"},
		{event("user/message", `{"role":"user","id":"m1","source":{"kind":"plugin","plugin":"plan","form":"notice","summary":"switched to plan mode"},"content":[{"type":"text","text":"long text"}]}`),
			"plan notice (plugin): switched to plan mode"},
		{event("user/message", `{"role":"user","id":"m2","source":{"kind":"plugin","plugin":"plan"},"content":[{"type":"text","text":"The user "},{"type":"text","text":"switched."}]}`),
			"plan - (plugin): The user switched."},
		// A person's own message (a prompt, or one steered in with kubectl plan message) is shown.
		{event("user/message", `{"role":"user","id":"m3","source":{"kind":"user"},"content":[{"type":"text","text":"draft the "},{"type":"text","text":"migration"}]}`),
			`message from the user: "draft the migration"`},
		{event("user/message", `{"role":"user","id":"m4","source":{"kind":"system"},"content":[{"type":"text","text":"x"}]}`), ""},
		{event("tool/call", `{"turn":3,"step":2,"callId":"c1","name":"exit_plan_mode"}`), "exit_plan_mode (call c1, turn 3 step 2)"},
		{event("tool/call", `{"turn":3,"step":2,"callId":"c2","name":"read"}`), ""},
		// The harness's shape (and the SDK's), then the one earlier operator releases wrote.
		{event("tool/result", `{"turn":3,"step":2,"message":{"source":{"kind":"tool","callId":"c1"},`+
			`"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"approved"}],"isError":false}],"role":"user","id":"r1"}}`),
			"exit_plan_mode result (call c1, ok): approved"},
		{event("tool/result", `{"turn":3,"step":2,"message":{"source":{"kind":"tool","callId":"c1"},`+
			`"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"keep   planning"}],"isError":true}],"role":"user","id":"r2"}}`),
			"exit_plan_mode result (call c1, error): keep planning"},
		{event("tool/result", `{"message":{"source":{"kind":"tool","callId":"c2"},`+
			`"content":[{"type":"tool-result","toolCallId":"c2","content":[{"type":"text","text":"file"}],"isError":false}],"role":"user","id":"r3"}}`), ""},
		{event("tool/result", `{"message":{"role":"toolResult","callId":"c1","toolName":"exit_plan_mode","content":[{"type":"text","text":"keep   planning"}],"isError":true}}`),
			"exit_plan_mode result (call c1, error): keep planning"},
		{event("tool/result", `{"message":{"role":"toolResult","callId":"c9","toolName":"exit_plan_mode","content":[],"isError":false}}`), "exit_plan_mode result (call c9, ok): "},
		{event("assistant/message", `{"content":[]}`), ""},
	} {
		got, ok := s.summarise(tc.ev)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("%s %s: got %q (shown %v), want %q", tc.ev.Type, tc.ev.Data, got, ok, tc.want)
		}
	}
	// Without the section in force (no permission to read the config) the guidance fact is
	// left out rather than guessed.
	bare := newSummariser("")
	if got, _ := bare.summarise(event("request/header", `{"reason":"resume","header":{"tools":[{"name":"read"}]}}`)); got != "reason=resume plan=off tools=[read]" {
		t.Errorf("header without a section: %q", got)
	}
	// It still tells the guidance a plan-mode request carried, by its text, once a plan-off
	// request has shown the prompt without it.
	bare.summarise(event("request/header", `{"reason":"resume","header":{"system":"base"}}`))
	bare.summarise(event("plan/mode", `{"active":true}`))
	got, _ := bare.summarise(event("request/header", `{"reason":"change","header":{"system":"base\n\nAn older guidance text.\n\nStay in it."}}`))
	if got != `reason=change plan=on guidance=sha256:3b987299 "An older guidance text. Stay in it." tools=[]` {
		t.Errorf("guidance without a section: %q", got)
	}
}

// `kubectl plan log` against a real SQLite log: the table of plan-relevant events, a session
// with no log in the store, and a store that cannot be opened.
// testLog is a real SQLite log in a temporary folder, and a function that appends events to
// the session demo-id at its end, the first at 2030-01-02T03:04:05Z and each one a millisecond
// after the one before.
func testLog(t *testing.T) (url string, add func(...harness.Event)) {
	t.Helper()
	ctx := context.Background()
	url = "sqlite://" + filepath.Join(t.TempDir(), "log.db")
	store, err := sessionlog.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return url, func(evs ...harness.Event) {
		t.Helper()
		tail, err := store.Tail(ctx, "demo-id")
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			evs[i].Seq = tail.NextSeq + int64(i)
			evs[i].Time = 1893553445000 + evs[i].Seq
		}
		if _, err := store.Append(ctx, "demo-id", evs); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLogCommand(t *testing.T) {
	ctx := context.Background()
	url, add := testLog(t)
	add(event("plan/mode", `{"active":true}`), event("turn/start", `{"turn":1}`), event("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`))

	c := newCLI(t, session("demo"), session("idle"))
	if err := c.log(ctx, "demo", logFlags{store: url, tail: -1}); err != nil {
		t.Fatal(err)
	}
	wantLines(t, c.out.String(),
		"SEQ TIME EVENT DETAIL",
		"0 2030-01-02T03:04:05.000Z plan/mode plan mode on (active=true)",
		"1 2030-01-02T03:04:05.001Z turn/start turn 1",
		"2 2030-01-02T03:04:05.002Z turn/end turn 1 (completed)",
	)

	t.Setenv(StoreEnv, url) // the environment names the store when --store does not
	err := c.log(ctx, "idle", logFlags{tail: -1})
	if err == nil || !strings.Contains(err.Error(), `session "idle-id" (spec.sessionID of AgentSession "idle") has no log in this store yet`) {
		t.Errorf("a session with no log: %v", err)
	}
	// A mistyped SQLite path is an error naming it, and no file is created.
	typo := filepath.Join(t.TempDir(), "lgo.db")
	err = c.log(ctx, "demo", logFlags{store: "sqlite://" + typo, tail: -1})
	if err == nil || !strings.Contains(err.Error(), "no SQLite session log at "+typo) {
		t.Errorf("a mistyped store: %v", err)
	}
	if _, statErr := os.Stat(typo); statErr == nil {
		t.Errorf("kubectl plan log created %s", typo)
	}
	err = c.log(ctx, "demo", logFlags{store: "mysql://nowhere", tail: -1})
	if err == nil || !strings.HasPrefix(err.Error(), "cannot open the session-log store: ") {
		t.Errorf("an unknown store scheme: %v", err)
	}
}

// `kubectl plan log` and `kubectl plan status` open the store the user names: whatever form
// its connection string has, a failure never prints its password.
func TestStoreErrorsNeverShowThePassword(t *testing.T) {
	ctx := context.Background()
	c := newCLI(t, session("demo"))
	for _, url := range secretStoreURLs {
		err := c.log(ctx, "demo", logFlags{store: url, tail: -1})
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("kubectl plan log --store %s: %v", connstr.Redact(url), err)
		}
		if _, err := readLive(ctx, url, "demo-id"); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("readLive(%s): %v", connstr.Redact(url), err)
		}
	}
}

// secretStoreURLs are stores that cannot be reached, in each form a password can take.
var secretStoreURLs = []string{
	"postgres://planmode:s3cret@127.0.0.1:1/log?sslmode=disable&connect_timeout=1",
	"postgres://planmode@127.0.0.1:1/log?sslmode=disable&password=s3cret&connect_timeout=1",
	"host=127.0.0.1 port=1 user=planmode password=s3cret dbname=log",
	"sqlite:///nonexistent/log.db?password=s3cret",
}
