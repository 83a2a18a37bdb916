package refagent

import (
	"strings"
	"testing"
	"time"
)

func TestParseScript(t *testing.T) {
	s, err := ParseScript(strings.NewReader(`# demo
turn explore the repo
step
retry
tool read
sleep 250ms
step draft it
end
turn
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Op{
		{Kind: OpTurn, Arg: "explore the repo", Line: 2},
		{Kind: OpStep, Line: 3},
		{Kind: OpRetry, Line: 4},
		{Kind: OpTool, Arg: "read", Line: 5},
		{Kind: OpSleep, Arg: "250ms", Dur: 250 * time.Millisecond, Line: 6},
		{Kind: OpStep, Arg: "draft it", Line: 7},
		{Kind: OpEnd, Line: 8},
		{Kind: OpTurn, Line: 9},
	}
	if len(s) != len(want) {
		t.Fatalf("got %d ops, want %d: %+v", len(s), len(want), s)
	}
	for i := range want {
		if s[i] != want[i] {
			t.Errorf("op %d = %+v, want %+v", i, s[i], want[i])
		}
	}
}

func TestParseScriptErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "script is empty"},
		{"step", `line 1: "step" before any "turn"`},
		{"turn\nretry", `line 2: "retry" needs a "step"`},
		{"turn\nend\nstep", `line 3: "step" before any "turn"`},
		{"turn\nstep\nretry now", `line 3: "retry" takes no argument`},
		{"turn\nsleep soon", "line 2: sleep needs a duration"},
		{"turn\nstep\ntool", "line 3: tool needs a name"},
		{"turn\nexit # Plan", `line 2: "exit" needs a "step"`},
		{"turn\nstep\nexit", "line 3: exit needs the plan"},
		{"turn\njump", `line 2: unknown instruction "jump"`},
		{"turn\nstep\npresent", "line 3: present needs the plan"},
		{"on-message\npresent # Plan", `line 2: "present" needs a "step"`},
		{"on-message now", "line 1: on-message takes no argument"},
		{"turn\non-message", "line 2: on-message inside an open turn"},
		{"on-message\nstep\non-message", "line 3: a second on-message"},
		{"on-message\nstep\nturn again", `line 3: "turn" after on-message`},
		{"on-message\nstep\nend", `line 3: "end" after on-message`},
	} {
		_, err := ParseScript(strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseScript(%q) error = %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

// The lines before on-message run once; those after it are each message's turn, which without
// on-message is one step.
func TestScriptParts(t *testing.T) {
	s, err := ParseScript(strings.NewReader("turn hello\nstep\nend\non-message\nstep\npresent # Plan\nstep\n"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(s Script) string {
		out := make([]string, 0, len(s))
		for _, op := range s {
			out = append(out, string(op.Kind))
		}
		return strings.Join(out, " ")
	}
	if got := kinds(s.atStart()); got != "turn step end" {
		t.Errorf("atStart = %s", got)
	}
	if got := kinds(s.perMessage()); got != "step present step" {
		t.Errorf("perMessage = %s", got)
	}
	plain := Generate(1, 1)
	if got := kinds(plain.atStart()); got != "turn step end" {
		t.Errorf("without on-message, atStart = %s", got)
	}
	if got := kinds(plain.perMessage()); got != "step" {
		t.Errorf("without on-message, perMessage = %s", got)
	}
}

func TestGenerate(t *testing.T) {
	s := Generate(2, 3)
	kinds := make([]string, 0, len(s))
	for _, op := range s {
		kinds = append(kinds, string(op.Kind))
	}
	if got := strings.Join(kinds, " "); got != "turn step step step end turn step step step end" {
		t.Fatalf("Generate(2,3) = %s", got)
	}
}
