package plancli

import (
	"context"
	"errors"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// toggled returns a session whose committed state is logged, with a turn open or not, and the
// default PlanModeConfig beside it.
func toggled(logged, turnOpen bool) *v1alpha1.AgentSession {
	as := session("demo")
	as.Spec.PlanMode.Active = bp(logged)
	as.Status.PlanMode = v1alpha1.PlanModeStatus{Active: logged, Selection: bp(logged), TurnOpen: turnOpen}
	return as
}

// With --wait=0 the reply is the harness's /plan reply predicted from the status read before
// the write, and the selection is written to spec.
func TestToggleReplies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		as       *v1alpha1.AgentSession
		x        bool
		reply    string
		wantSpec bool
	}{
		// The harness's texts, in kubectl's words: the command that leaves plan mode on this session.
		{"on between turns", toggled(false, false), true, "Plan mode on. Use kubectl plan off demo -n team-a to leave.", true},
		{"on during a turn", toggled(false, true), true, "Entering plan mode (applies from the next step). Use kubectl plan off demo -n team-a to leave.", true},
		{"off between turns", toggled(true, false), false, "Plan mode off.", false},
		{"off during a turn", toggled(true, true), false, "Leaving plan mode (applies from the next step).", false},
		{"off when already off", toggled(false, false), false, "Plan mode is already off.", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t, tc.as, config(v1alpha1.DefaultPlanModeConfigName))
			if err := c.toggle(context.Background(), "demo", tc.x, "", nil); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(c.out.String()); got != tc.reply {
				t.Errorf("reply %q, want %q", got, tc.reply)
			}
			if a := c.read(t).Spec.PlanMode.Active; a == nil || *a != tc.wantSpec {
				t.Errorf("spec.planMode.active %v, want %v", a, tc.wantSpec)
			}
			if c.errOut.Len() != 0 {
				t.Errorf("stderr: %s", c.errOut)
			}
		})
	}
}

// "off" while an entry waits for the next step boundary cancels it.
func TestToggleCancelsAPendingEntry(t *testing.T) {
	as := toggled(false, true)
	as.Spec.PlanMode.Active = bp(true)
	as.Status.PlanMode.Selection = bp(true)
	as.Status.PlanMode.Pending, as.Status.PlanMode.PendingActive = true, bp(true)
	c := newCLI(t, as)
	if err := c.toggle(context.Background(), "demo", false, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(c.out.String()); got != harness.ReplyOffCancelled {
		t.Errorf("reply %q, want %q", got, harness.ReplyOffCancelled)
	}
}

// A message enters plan mode and carries its text, trimmed, with a fresh steer id, in the same
// write.
func TestToggleWithMessage(t *testing.T) {
	c := newCLI(t, toggled(false, true), config(v1alpha1.DefaultPlanModeConfigName))
	if err := c.toggle(context.Background(), "demo", true, "  draft the migration \n", nil); err != nil {
		t.Fatal(err)
	}
	as := c.read(t)
	if q := as.Spec.SteerQueue; len(q) != 1 || q[0].Text != "draft the migration" || !strings.HasPrefix(q[0].ID, "kp-") {
		t.Fatalf("spec.steerQueue %+v, want the trimmed text with a kp- id", q)
	}
	if a := as.Spec.PlanMode.Active; a == nil || !*a {
		t.Errorf("spec.planMode.active %v, want true", a)
	}
	if !strings.Contains(c.out.String(), "Message queued for the agent's next step") {
		t.Errorf("reply does not say the message waits for the next step of the open turn: %q", c.out.String())
	}
	first := as.Spec.SteerQueue[0].ID
	// A second message before the first is delivered: both are queued, in order.
	c = newCLI(t, as)
	if err := c.toggle(context.Background(), "demo", true, "again", nil); err != nil {
		t.Fatal(err)
	}
	as = c.read(t)
	if q := as.Spec.SteerQueue; len(q) != 2 || q[0].ID != first || q[1].Text != "again" || q[1].ID == first {
		t.Fatalf("second message: spec.steerQueue %+v, want [first, again]", q)
	}
	// The agent recorded the first: a third message drops it and keeps the second.
	as.Status.Agent = &v1alpha1.AgentReport{SteerID: first}
	second := as.Spec.SteerQueue[1].ID
	c = newCLI(t, as)
	if err := c.toggle(context.Background(), "demo", true, "third", nil); err != nil {
		t.Fatal(err)
	}
	if q := c.read(t).Spec.SteerQueue; len(q) != 2 || q[0].ID != second || q[1].Text != "third" {
		t.Errorf("third message: spec.steerQueue %+v, want [again, third]", q)
	}
}

// A message to an idle agent starts a turn, and the reply says so; a message not recorded yet
// is kept, first, and the new one takes an id after it.
func TestMessageToAnIdleAgent(t *testing.T) {
	as := toggled(true, false)
	as.Spec.SteerQueue = []v1alpha1.SteerMessage{{ID: "kp-9999999999999999999", Text: "written by a writer whose clock is ahead"}}
	c := newCLI(t, as, config(v1alpha1.DefaultPlanModeConfigName))
	if err := c.toggle(context.Background(), "demo", true, "go", nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.out.String(), "the agent is idle, so it starts a turn with it") {
		t.Errorf("reply: %q", c.out.String())
	}
	got := c.read(t)
	if q := got.Spec.SteerQueue; len(q) != 2 || q[0].ID != "kp-9999999999999999999" || q[1].Text != "go" || q[1].ID != "kp-10000000000000000000" {
		t.Errorf("spec.steerQueue %+v, want [the kept one, go] with go's id after the kept one's", q)
	}
}

// A selection spec already records, with the state where it says, writes nothing.
func TestToggleNoopWritesNothing(t *testing.T) {
	c := newCLI(t, toggled(true, false))
	before := c.read(t).ResourceVersion
	if err := c.toggle(context.Background(), "demo", true, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := c.read(t).ResourceVersion; got != before {
		t.Errorf("a noop wrote the session: resourceVersion %s -> %s", before, got)
	}
	if got := strings.TrimSpace(c.out.String()); got != "Plan mode is already on. Use kubectl plan off demo -n team-a to leave." {
		t.Errorf("reply %q, want already on (not the harness's entering copy)", got)
	}
}

// spec.planMode.active already true while plan mode moved away from it (a plan approved while
// spec kept the selection): the manager acts only on a changed value, so the plugin says how
// to give it one instead of writing nothing.
func TestToggleSpecAlreadyRecordsTheSelection(t *testing.T) {
	as := toggled(false, false)
	as.Spec.PlanMode.Active, as.Status.PlanMode.Selection = bp(true), bp(true) // taken on, then left
	c := newCLI(t, as)
	err := c.toggle(context.Background(), "demo", true, "", nil)
	if err == nil || !strings.Contains(err.Error(), "so run: kubectl plan off demo && kubectl plan on demo") {
		t.Errorf("err = %v", err)
	}
}

// An entry whose PlanModeConfig does not exist waits for it: the plugin warns before writing.
func TestToggleWarnsOfAMissingConfig(t *testing.T) {
	as := toggled(false, false)
	as.Spec.PlanMode.ConfigRef = &v1alpha1.ConfigReference{Name: "strict"}
	c := newCLI(t, as, config(v1alpha1.DefaultPlanModeConfigName))
	if err := c.toggle(context.Background(), "demo", true, "", nil); err != nil {
		t.Fatal(err)
	}
	want := `warning: PlanModeConfig "strict" does not exist in namespace "team-a": entering plan mode waits until it is created (or set spec.planMode.configRef.name)`
	if got := strings.TrimSpace(c.errOut.String()); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	// Leaving plan mode needs no config.
	c = newCLI(t, toggled(true, false))
	if err := c.toggle(context.Background(), "demo", false, "", nil); err != nil {
		t.Fatal(err)
	}
	if c.errOut.Len() != 0 {
		t.Errorf("off warned: %s", c.errOut)
	}
}

// The short form's session not found: the hint is joined to the error.
func TestToggleNotFoundHint(t *testing.T) {
	c := newCLI(t)
	err := c.toggle(context.Background(), "stauts", true, "", func() error { return errors.New("(did you mean status?)") })
	if err == nil || !strings.HasPrefix(err.Error(), `no AgentSession "stauts" in namespace "team-a"`) || !strings.HasSuffix(err.Error(), "(did you mean status?)") {
		t.Errorf("err = %v", err)
	}
}

// With --wait, the outcome is read from the status the manager writes once it has taken the
// selection on.
func TestObserve(t *testing.T) {
	ctx := context.Background()
	taken := func(mutate func(pm *v1alpha1.PlanModeStatus)) *v1alpha1.AgentSession {
		as := session("demo")
		as.Status.ObservedGeneration = 5
		as.Status.PlanMode.Selection = bp(true)
		mutate(&as.Status.PlanMode)
		return as
	}
	oldAck := &v1alpha1.BoundaryAck{Turn: 1, Step: 1, Seq: 3, Result: v1alpha1.BoundaryAdmitted}
	for _, tc := range []struct {
		name   string
		as     *v1alpha1.AgentSession
		before planmode.State
		want   planmode.Outcome
	}{
		{"committed between turns", taken(func(pm *v1alpha1.PlanModeStatus) { pm.Active = true; pm.LastBoundary = oldAck }),
			planmode.State{}, planmode.Committed},
		{"queued for the next boundary", taken(func(pm *v1alpha1.PlanModeStatus) { pm.Pending, pm.PendingActive = true, bp(true) }),
			planmode.State{}, planmode.Queued},
		{"flushed by a boundary since the write", taken(func(pm *v1alpha1.PlanModeStatus) {
			pm.Active = true
			pm.LastBoundary = &v1alpha1.BoundaryAck{Turn: 1, Step: 2, Seq: 5, NextSeq: 6, Result: v1alpha1.BoundaryAdmitted, Active: true}
		}), planmode.State{}, planmode.Queued},
		// The first step after a between-turns commit reports its boundary to record the owed
		// notice; that boundary appended nothing, so the selection was committed at once.
		{"committed, then the notice's boundary", taken(func(pm *v1alpha1.PlanModeStatus) {
			pm.Active = true
			pm.LastBoundary = &v1alpha1.BoundaryAck{Turn: 2, Step: 1, Seq: 7, NextSeq: 7, Result: v1alpha1.BoundaryAdmitted, Active: true}
		}), planmode.State{}, planmode.Committed},
		{"a pending exit undone", taken(func(pm *v1alpha1.PlanModeStatus) { pm.Active = true }),
			planmode.State{Logged: true, Pending: &planmode.Pending{Active: false}}, planmode.Cancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t, tc.as)
			c.wait = time.Second
			got, seen, ok := c.observe(ctx, "demo", true, written{before: tc.before, predicted: planmode.Noop, gen: 5, ack: oldAck}, c.wait)
			if !ok || seen == nil || got.outcome != tc.want {
				t.Errorf("outcome %q (ok %v), want %q", got.outcome, ok, tc.want)
			}
		})
	}
	// Not taken on within --wait (the manager has not seen the write's generation).
	c := newCLI(t, taken(func(*v1alpha1.PlanModeStatus) {}))
	c.wait = 100 * time.Millisecond
	if _, _, ok := c.observe(ctx, "demo", true, written{gen: 6}, c.wait); ok {
		t.Error("observed a selection the manager has not taken on")
	}
}

// API errors become messages that say what was wrong and what to do.
func TestExplain(t *testing.T) {
	o := &Options{ns: testNS}
	gr := schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "agentsessions"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"not found", apierrors.NewNotFound(gr, "demo"),
			`no AgentSession "demo" in namespace "team-a" (list them with: kubectl plan list -n team-a)`},
		{"no such resource", &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: gr.Group, Kind: "AgentSession"}},
			"the AgentSession API (agents.harness.dev/v1alpha1) is not installed in this cluster: install the planmode-operator CRDs (config/crd)"},
		{"RBAC", apierrors.NewForbidden(gr, "demo", errors.New("user ed cannot patch")),
			`not allowed to toggle plan mode: this needs the "patch" permission on agentsessions.agents.harness.dev in namespace "team-a" ` +
				`(server said: agentsessions.agents.harness.dev "demo" is forbidden: user ed cannot patch)`},
		{"webhook", apierrors.NewForbidden(gr, "demo", errors.New(`admission webhook "vagentsession" denied the request: not the agent`)),
			`not allowed to toggle plan mode: agentsessions.agents.harness.dev "demo" is forbidden: admission webhook "vagentsession" denied the request: not the agent`},
		{"invalid", apierrors.NewBadRequest("spec.steer.text: too long"),
			"the API server refused the change (toggle plan mode): spec.steer.text: too long"},
		{"unauthorized", apierrors.NewUnauthorized("token expired"), "not logged in to the cluster (toggle plan mode): token expired"},
		{"other", errors.New("connection refused"), "cannot toggle plan mode: connection refused"},
	} {
		if got := o.explain(tc.err, "demo", "patch", "toggle plan mode"); got == nil || got.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.name, got, tc.want)
		}
	}
}

// A toggle during an open plan review says what happens to the review: the agent waits on it,
// so leaving plan mode applies only after it is decided.
func TestToggleMentionsAnOpenReview(t *testing.T) {
	as := underReviewSession("# Migrate\n")
	as.Status.PlanMode.Selection, as.Status.PlanMode.TurnOpen = bp(true), true
	c := newCLI(t, as, config(v1alpha1.DefaultPlanModeConfigName))
	if err := c.toggle(context.Background(), "demo", false, "", nil); err != nil {
		t.Fatal(err)
	}
	want := "Leaving plan mode (applies from the next step).\n" +
		`The review of "Migrate" (review r1) is still open and the agent is waiting on it: plan mode is left at the agent's first step after the review is decided or expires. ` +
		"To stop waiting, decide it: kubectl plan dismiss demo (or approve, which also leaves plan mode)."
	if got := strings.TrimSpace(c.out.String()); got != want {
		t.Errorf("reply %q, want %q", got, want)
	}

	as = underReviewSession("# Migrate\n")
	as.Status.PlanMode.Selection, as.Status.PlanMode.TurnOpen = bp(true), true
	as.Spec.PlanMode.ConfigRef = &v1alpha1.ConfigReference{Name: "strict"}
	c = newCLI(t, as, config("strict"))
	if err := c.toggle(context.Background(), "demo", true, "", nil); err != nil {
		t.Fatal(err)
	}
	if got := c.out.String(); !strings.Contains(got, `The review of "Migrate" (review r1) is open`) || !strings.Contains(got, "kubectl plan approve|revise|dismiss demo") {
		t.Errorf("on during a review: %q", got)
	}
}
