package plancli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// The limits checked before sending are the CRD's.
func TestTextLimitsAreTheCRDs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "agents.harness.dev_agentsessions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	text := spec.Properties["steerQueue"].Items.Schema.Properties["text"].MaxLength
	feedback := spec.Properties["review"].Properties["feedback"].MaxLength
	if text == nil || *text != maxMessageChars || feedback == nil || *feedback != maxFeedbackChars {
		t.Errorf("the CRD allows %v characters of message text and %v of feedback; the plugin checks %d and %d", text, feedback, maxMessageChars, maxFeedbackChars)
	}
}

// A message or feedback comes as words, from --file, or from stdin with --file -; one way only.
func TestTextArg(t *testing.T) {
	file := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n\nlong text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words      []string
		file, want string
	}{
		{[]string{"draft", "it"}, "", "draft it"},
		{nil, file, "# Notes\n\nlong text\n"},
		{nil, "-", "from stdin"},
	} {
		got, err := textArg(tc.words, tc.file, strings.NewReader("from stdin"), "the message")
		if err != nil || got != tc.want {
			t.Errorf("textArg(%q, %q) = %q, %v; want %q", tc.words, tc.file, got, err, tc.want)
		}
	}
	if _, err := textArg([]string{"x"}, file, nil, "the message"); err == nil || !strings.Contains(err.Error(), "the message given twice") {
		t.Errorf("words and --file: %v", err)
	}
	if _, err := textArg(nil, filepath.Join(t.TempDir(), "missing.md"), nil, "the message"); err == nil || !strings.HasPrefix(err.Error(), "--file: ") {
		t.Errorf("a missing file: %v", err)
	}
}

// A message over the CRD's limit is refused before anything is written, naming the limit; so is
// feedback, on the command line or in a file.
func TestLongTextRefusedBeforeSending(t *testing.T) {
	c := newCLI(t, toggled(false, false), config(v1alpha1.DefaultPlanModeConfigName))
	before := c.read(t).ResourceVersion
	long := strings.Repeat("ä", maxMessageChars+1) // characters, not bytes, count
	err := c.toggle(context.Background(), "demo", true, long, nil)
	if err == nil || err.Error() != "the message is 65537 characters, and spec.steerQueue[].text holds at most 65536: shorten it, or send it as several messages; nothing was sent" {
		t.Errorf("a long message: %v", err)
	}
	if c.read(t).ResourceVersion != before {
		t.Error("a refused message wrote the session")
	}
	if err := c.toggle(context.Background(), "demo", true, strings.Repeat("ä", maxMessageChars), nil); err != nil {
		t.Errorf("a message at the limit: %v", err)
	}
	if _, err := feedbackOf(nil, "", "-", strings.NewReader(strings.Repeat("x", maxFeedbackChars+10))); err == nil ||
		!strings.Contains(err.Error(), "spec.review.feedback holds at most 65536") {
		t.Errorf("long feedback on stdin: %v", err)
	}
}

// kubectl plan revise SESSION FEEDBACK...: the words are the feedback, as --feedback was.
func TestReviseTakesFeedbackAsWords(t *testing.T) {
	c := newCLI(t, underReviewSession("# Migrate\n"))
	cmd := newReviseCommand(c.Options)
	cmd.SetArgs([]string{"demo", "consider", "the", "resume", "path", "--wait=0"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := c.read(t).Spec.Review; r == nil || r.Decision != v1alpha1.ReviewKeepPlanning || r.Feedback != "consider the resume path" {
		t.Errorf("spec.review %+v", r)
	}
	if !strings.Contains(c.out.String(), `Sent "Migrate" (review r1) back with your feedback`) {
		t.Errorf("reply %q", c.out.String())
	}
}

// A mistyped session name gets the names it is close to, as a mistyped subcommand does.
func TestDidYouMeanASession(t *testing.T) {
	c := newCLI(t, session("demo"), session("payments-migration"))
	_, err := c.get(context.Background(), "dmeo")
	if err == nil || err.Error() != `no AgentSession "dmeo" in namespace "team-a": did you mean "demo"? (list them with: kubectl plan list -n team-a)` {
		t.Errorf("dmeo: %v", err)
	}
	if _, err := c.get(context.Background(), "payments"); err == nil || !strings.Contains(err.Error(), `did you mean "payments-migration"?`) {
		t.Errorf("a prefix: %v", err)
	}
	if _, err := c.get(context.Background(), "zzz"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("nothing close: %v", err)
	}
}

// Shell completion offers the namespace's sessions for SESSION, and nothing for free text.
func TestCompleteSession(t *testing.T) {
	c := newCLI(t, session("demo"), session("deploy-bot"), session("payments"))
	got, _ := c.completeSession(nil, nil, "de")
	if strings.Join(got, " ") != "demo deploy-bot" {
		t.Errorf("completions for de: %v", got)
	}
	if got, _ := c.completeSession(nil, []string{"demo"}, ""); len(got) != 0 {
		t.Errorf("completions after the session: %v", got)
	}
}

// review --wait waits for a plan that awaits a decision, and says so; without one in time it
// fails naming how to get one.
func TestReviewWaitsForAPlan(t *testing.T) {
	as := underReviewSession("# P")
	as.Status.Agent = nil
	c := newCLI(t, as)
	errOut := &framework.SyncBuffer{}
	c.Streams.ErrOut = errOut
	err := c.review(context.Background(), "demo", false, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), `no plan awaits a decision on "demo" after 300ms`) {
		t.Errorf("no plan: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.review(context.Background(), "demo", true, time.Minute) }()
	waitForText(t, errOut, `Waiting up to 1m0s for the agent of "demo" to present a plan`)
	posted := c.read(t)
	posted.Status.Agent = &v1alpha1.AgentReport{Review: &v1alpha1.PlanReviewRequest{ID: "r2", Plan: "# The plan\n"}}
	if err := c.c.Update(context.Background(), posted); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.out.String() != "# The plan\n" {
		t.Errorf("review --wait --raw printed %q", c.out.String())
	}
}

// log --tail N shows the last N lines; log -f then prints each new line, and a plan as it
// comes to await a decision, until Ctrl-C.
func TestLogTailAndFollow(t *testing.T) {
	ctx := context.Background()
	url, appendEvents := testLog(t)
	appendEvents(event("plan/mode", `{"active":true}`), event("turn/start", `{"turn":1}`), event("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`))

	c := newCLI(t, session("demo"))
	if err := c.log(ctx, "demo", logFlags{store: url, tail: 1}); err != nil {
		t.Fatal(err)
	}
	if got := lines(c.out.String()); len(got) != 3 || !got["SEQ TIME EVENT DETAIL"] || !got["2 2030-01-02T03:04:05.002Z turn/end turn 1 (completed)"] {
		t.Errorf("--tail 1:\n%s", c.out.String())
	}

	out := &framework.SyncBuffer{}
	c.Streams.Out = out
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.log(fctx, "demo", logFlags{store: url, tail: 0, follow: true}) }()
	waitForText(t, out, "SEQ")
	appendEvents(event("turn/start", `{"turn":2}`))
	waitForText(t, out, "turn/start      turn 2")
	as := c.read(t)
	requested := metav1.NewTime(time.Date(2030, 1, 2, 3, 5, 0, 0, time.UTC))
	as.Status.Agent = &v1alpha1.AgentReport{Review: &v1alpha1.PlanReviewRequest{ID: "r1", Turn: 2, Plan: "# Demo plan\n", RequestedAt: &requested}}
	as.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: v1alpha1.ReviewPending}
	if err := c.c.Update(ctx, as); err != nil {
		t.Fatal(err)
	}
	waitForText(t, out, `review          "Demo plan" (review r1, turn 2) awaits a decision: kubectl plan review demo`)
	stop()
	if err := <-done; err != nil {
		t.Errorf("log -f after Ctrl-C: %v", err)
	}
	if strings.Contains(out.String(), "plan/mode") {
		t.Errorf("--tail 0 -f printed what was there before:\n%s", out.String())
	}
	if n := strings.Count(out.String(), "awaits a decision"); n != 1 {
		t.Errorf("the review line printed %d times:\n%s", n, out.String())
	}
}

// list -w prints the list, then a row for each change, until Ctrl-C.
func TestListWatch(t *testing.T) {
	c := newCLI(t, session("demo"))
	out := &framework.SyncBuffer{}
	c.Streams.Out = out
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.list(ctx, listFlags{watch: true}) }()
	waitForText(t, out, "demo   false   ")
	as := c.read(t)
	as.Status.PlanMode.Active = true
	if err := c.c.Update(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	waitForText(t, out, "demo   true")
	stop()
	if err := <-done; err != nil {
		t.Errorf("list -w after Ctrl-C: %v", err)
	}
}

// waitForText waits for text in out, which a command writes from another goroutine.
func waitForText(t *testing.T, out *framework.SyncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", text, out.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a buffer another goroutine writes
	}
}
