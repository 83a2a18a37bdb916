package plancli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

var changed = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// busySession has every fact status shows: committed plan mode, an approved exit pending,
// spec at false, a config in force, a notice, a failed boundary, a plan under review decided
// by the user but not by the manager yet, a delivered message and a Ready condition, and a
// spec change the manager has not caught up with.
func busySession() *v1alpha1.AgentSession {
	as := session("demo")
	as.Generation = 3
	as.Spec.PlanMode.Active = bp(false)
	as.Spec.PlanMode.ConfigRef = &v1alpha1.ConfigReference{Name: "strict"}
	as.Spec.ReviewTimeout = &metav1.Duration{Duration: 90 * time.Minute}
	as.Spec.SteerQueue = []v1alpha1.SteerMessage{{ID: "kp-1", Text: "draft   the\nmigration"}}
	as.Spec.Review = &v1alpha1.ReviewDecision{ReviewID: "r1", Decision: v1alpha1.ReviewApprove}
	lt := metav1.NewTime(changed.In(time.FixedZone("CET", 3600)))
	as.Status = v1alpha1.AgentSessionStatus{
		ObservedGeneration: 2,
		PlanMode: v1alpha1.PlanModeStatus{
			Active: true, Pending: true, PendingActive: bp(false), PendingSource: v1alpha1.PendingSourceExit,
			TurnOpen: true, NextSeq: 42, LastTransitionTime: &lt,
			Config: &v1alpha1.ConfigInForce{Name: "strict", Generation: 7, SectionSHA256: "0123456789abcdef0123"},
			Notice: &v1alpha1.OwedNotice{Seq: 40, Text: "The user switched this session to plan mode."},
			LastBoundary: &v1alpha1.BoundaryAck{Turn: 2, Step: 3, Seq: 41, Result: v1alpha1.BoundaryFailed, Active: true,
				Message: "seq 41 is behind the log"},
		},
		Agent: &v1alpha1.AgentReport{SteerID: "kp-1",
			Review: &v1alpha1.PlanReviewRequest{ID: "r1", Turn: 2, Plan: "# Migrate the schema\n\n1. add columns\n"}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonSelectionPending, Message: "waiting for the next step boundary"}},
	}
	return as
}

func TestViewOf(t *testing.T) {
	v := viewOf(busySession())
	if v.Pending == nil || *v.Pending || v.PendingSource != v1alpha1.PendingSourceExit {
		t.Errorf("pending %v %q, want false Exit", v.Pending, v.PendingSource)
	}
	if v.ConfigRef != "strict" || v.ReviewTimeout != "1h30m0s" || !v.LastDelivered || v.ObservedCurrent {
		t.Errorf("configRef %q, reviewTimeout %q, lastMessageDelivered %v, observedCurrent %v; want strict, 1h30m0s, true, false",
			v.ConfigRef, v.ReviewTimeout, v.LastDelivered, v.ObservedCurrent)
	}
	if v.LastTransition == nil || !v.LastTransition.Equal(changed) || v.LastTransition.Location() != time.UTC {
		t.Errorf("last transition %v, want %v in UTC", v.LastTransition, changed)
	}
	if v.Ready != "False" || v.ReadyReason != v1alpha1.ReasonSelectionPending || v.Review == nil || v.Review.ID != "r1" {
		t.Errorf("ready %q %q, review %+v", v.Ready, v.ReadyReason, v.Review)
	}

	// Pending is status.planMode.pendingActive as it is (the PENDING column), also when it
	// equals the committed plan mode; a message the agent has not recorded is not delivered; no
	// configRef is the default config.
	as := session("quiet")
	as.Status.PlanMode.PendingActive = bp(true)
	as.Spec.SteerQueue = []v1alpha1.SteerMessage{{ID: "kp-1", Text: "hello"}, {ID: "kp-2", Text: "hi"}}
	as.Status.Agent = &v1alpha1.AgentReport{SteerID: "kp-1"}
	v = viewOf(as)
	if v.Pending == nil || !*v.Pending || v.LastDelivered || v.ConfigRef != v1alpha1.DefaultPlanModeConfigName || !v.ObservedCurrent {
		t.Errorf("quiet session: pending %v, lastMessageDelivered %v, configRef %q, observedCurrent %v", v.Pending, v.LastDelivered, v.ConfigRef, v.ObservedCurrent)
	}
}

func TestPrintStatus(t *testing.T) {
	var out bytes.Buffer
	if err := printStatus(&out, viewOf(busySession()), changed.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(),
		"Session: demo (namespace team-a, session ID demo-id)",
		"Plan mode: true (on), committed in the session log",
		"Pending: false (off) at the agent's next step boundary (an approved plan's exit, not narrated)",
		"Selected: false (off) (spec.planMode.active)",
		"Turn: open at the manager's last status write (selections wait for the next step boundary)",
		"Config: strict (generation 7, section sha256 0123456789ab)",
		"Last change: 2030-01-02T03:04:05Z (1m30s ago)",
		`Notice owed: "The user switched this session to plan mode." (for plan/mode at seq 40, as of the manager's last status write)`,
		"Last boundary: turn 2 step 3 seq 41: Failed, plan mode on: seq 41 is behind the log",
		"Log position: next seq 42",
		`Review: "Migrate the schema" (review r1, turn 2): Pending; decision Approve written, waiting for the manager`,
		`Last message: "draft the migration" (delivered)`,
		"Ready: False SelectionPending: waiting for the next step boundary",
		"Note: the manager has not caught up with the latest spec change yet",
	)
}

// A fresh session: nothing pending, nothing selected, no config read yet, never changed, no
// review, no Ready condition.
func TestPrintStatusFreshSession(t *testing.T) {
	var out bytes.Buffer
	if err := printStatus(&out, viewOf(session("fresh")), changed); err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(),
		"Plan mode: false (off), committed in the session log",
		"Pending: none (nothing waits for the agent's next step boundary)",
		"Selected: none (no selection: the session follows its log)",
		"Turn: none open at the manager's last status write (the agent may have opened one since)",
		"Config: default (requested; not read by the manager yet)",
		"Last change: not recorded in the status (the log has it: name the store with --store)",
		"Review: none (no plan presented)",
		"Ready: unknown (the manager has not reported yet)",
	)
	for _, absent := range []string{"Notice owed:", "Last boundary:", "Last message:", "Note:"} {
		if strings.Contains(out.String(), absent) {
			t.Errorf("a fresh session's status shows %q:\n%s", absent, out.String())
		}
	}
}

// With the live tail (--store), the turn and the log position come from the log, and a commit
// the status does not show yet is pointed out.
func TestPrintStatusLiveTail(t *testing.T) {
	v := viewOf(busySession())
	v.Live = &LiveTail{Active: false, NextSeq: 45, TurnOpen: true, Turn: 3, Step: 1}
	var out bytes.Buffer
	if err := printStatus(&out, v, changed); err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(),
		"Turn: 3 open, step 1 (live from the log: selections wait for the agent's next step boundary)",
		"Log position: next seq 45 (live; the status reflects 42)",
		"Note: the log has committed plan mode false (off) since the manager's last status write",
	)
	v.Live = &LiveTail{Active: true, NextSeq: 42}
	out.Reset()
	if err := printStatus(&out, v, changed); err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(), "Turn: none open (live from the log: selections are logged at once)")
	if strings.Contains(out.String(), "has committed") {
		t.Errorf("a live tail that agrees with the status is reported as a change:\n%s", out.String())
	}
}

// With the live tail, "Last change" is the time of the log's last plan/mode even when the
// status never recorded a transition, and a notice the agent has recorded (a step/start after
// its plan/mode) is no longer shown as owed.
func TestPrintStatusLastChangeAndNoticeFromTheLog(t *testing.T) {
	as := busySession()
	as.Status.PlanMode.LastTransitionTime = nil
	v := viewOf(as)
	at := changed.Add(-2 * time.Minute)
	v.Live = &LiveTail{Active: true, NextSeq: 45, LastPlanModeSeq: 40, LastPlanModeTime: &at, LastStepStartSeq: 43}
	var out bytes.Buffer
	if err := printStatus(&out, v, changed); err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(),
		"Last change: "+at.Format(time.RFC3339)+" (2m0s ago, plan/mode at seq 40)",
		`Notice: "The user switched this session to plan mode." recorded by the agent (step at seq 43)`,
	)
	if strings.Contains(out.String(), "Notice owed") || strings.Contains(out.String(), "never") {
		t.Errorf("a recorded notice or a logged change is misreported:\n%s", out.String())
	}
	// Before the agent's next step the notice is still owed.
	v.Live.LastStepStartSeq = 39
	out.Reset()
	if err := printStatus(&out, v, changed); err != nil {
		t.Fatal(err)
	}
	wantLines(t, out.String(), `Notice owed: "The user switched this session to plan mode." (for plan/mode at seq 40; the agent records it at its next step)`)
}

// kubectl plan status reads the live tail from a real SQLite log found through the kubeconfig
// context's extension, with no flag and no environment variable.
func TestStatusFindsTheStoreInTheKubeconfig(t *testing.T) {
	t.Setenv(StoreEnv, "")
	ctx := context.Background()
	dir := t.TempDir()
	url := "sqlite://" + filepath.Join(dir, "log.db")
	store, err := sessionlog.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	evs := []harness.Event{event("plan/mode", `{"active":false}`), event("turn/start", `{"turn":1}`)}
	for i := range evs {
		evs[i].Seq, evs[i].Time = int64(i), 1893553445000+int64(i)*1000 // 2030-01-02T03:04:05Z
	}
	if _, err := store.Append(ctx, "fresh-id", evs); err != nil {
		t.Fatal(err)
	}
	_ = store.Close()
	kubeconfig := writeKubeconfig(t, dir)
	if err := SetKubeconfigStore(kubeconfig, url); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, session("fresh"))
	c.Flags = genericclioptions.NewConfigFlags(false)
	c.Flags.KubeConfig = &kubeconfig
	if err := c.status(ctx, "fresh", "", ""); err != nil {
		t.Fatal(err)
	}
	wantLines(t, c.out.String(),
		"Turn: 1 open, step 0 (live from the log: selections wait for the agent's next step boundary)",
	)
	if !strings.Contains(strings.Join(strings.Fields(c.out.String()), " "), "Last change: 2030-01-02T03:04:05Z (") {
		t.Errorf("Last change is not the log's plan/mode time:\n%s", c.out.String())
	}
}

func TestReviewLine(t *testing.T) {
	as := busySession()
	as.Spec.Review = nil
	if got := reviewLine(viewOf(as)); got != `"Migrate the schema" (review r1, turn 2): posted, not opened by the manager yet` {
		t.Errorf("posted, no review status: %s", got)
	}
	as.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: v1alpha1.ReviewPending}
	if got := reviewLine(viewOf(as)); got != `"Migrate the schema" (review r1, turn 2): Pending, awaiting kubectl plan approve|revise|dismiss demo` {
		t.Errorf("undecided: %s", got)
	}
	as.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: v1alpha1.ReviewExpired, Message: strings.Repeat("x", 100)}
	if got := reviewLine(viewOf(as)); got != `"Migrate the schema" (review r1, turn 2): Expired (`+strings.Repeat("x", 79)+"…)" {
		t.Errorf("expired: %s", got)
	}
	// The status of an older review says nothing about this one.
	as.Status.Review = &v1alpha1.ReviewStatus{ID: "r0", Phase: v1alpha1.ReviewApproved}
	if got := reviewLine(viewOf(as)); !strings.HasSuffix(got, ": posted, not opened by the manager yet") {
		t.Errorf("older review's status: %s", got)
	}
	as.Status.Review = &v1alpha1.ReviewStatus{ID: "r1", Phase: v1alpha1.ReviewPending, Message: "posted"}
	if got := reviewLine(viewOf(as)); !strings.Contains(got, ": Pending, awaiting") {
		t.Errorf("pending review with a message: %s", got)
	}
	// A plan the agent withdrew: its review's phase stays.
	as.Status.Agent.Review = nil
	if got := reviewLine(viewOf(as)); got != "Pending (review r1; the agent has withdrawn its plan)" {
		t.Errorf("withdrawn: %s", got)
	}
}

func TestAbbreviate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a  b\n\tc", 10, "a b c"},
		{"abcdef", 6, "abcdef"},
		{"abcdefg", 6, "abcde…"},
		{"ääääääää", 4, "äää…"},
	} {
		if got := abbreviate(tc.in, tc.n); got != tc.want {
			t.Errorf("abbreviate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// -o json and -o yaml print the same facts as the text, as documents a script can read.
func TestStatusStructuredOutput(t *testing.T) {
	t.Setenv(StoreEnv, "")
	c := newCLI(t, busySession())
	if err := c.status(context.Background(), "demo", "json", ""); err != nil {
		t.Fatal(err)
	}
	var v StatusView
	if err := json.Unmarshal(c.out.Bytes(), &v); err != nil {
		t.Fatalf("-o json is not a StatusView: %v\n%s", err, c.out)
	}
	if v.Session != "demo" || !v.PlanMode || v.Pending == nil || *v.Pending || v.NextSeq != 42 || v.Review == nil || v.Live != nil {
		t.Errorf("-o json: %+v", v)
	}
	c.out.Reset()
	if err := c.status(context.Background(), "demo", "yaml", ""); err != nil {
		t.Fatal(err)
	}
	var y StatusView
	if err := yaml.Unmarshal(c.out.Bytes(), &y); err != nil {
		t.Fatalf("-o yaml is not a StatusView: %v\n%s", err, c.out)
	}
	if y.SessionID != "demo-id" || y.ConfigRef != "strict" || y.ReadyReason != v1alpha1.ReasonSelectionPending {
		t.Errorf("-o yaml: %+v", y)
	}
	if err := c.status(context.Background(), "missing", "", ""); err == nil ||
		err.Error() != `no AgentSession "missing" in namespace "team-a" (list them with: kubectl plan list -n team-a)` {
		t.Errorf("status of a missing session: %v", err)
	}
}

// A selection made during a turn that the manager has not written yet (it holds that write for
// the agent's boundary) shows as pending, not as nothing waiting.
func TestPrintStatusUnwrittenSelection(t *testing.T) {
	as := session("demo")
	as.Generation = 4
	as.Spec.PlanMode.Active = bp(true)
	as.Status = v1alpha1.AgentSessionStatus{ObservedGeneration: 3,
		PlanMode: v1alpha1.PlanModeStatus{Selection: bp(false), TurnOpen: true, NextSeq: 9}}
	v := viewOf(as)
	if v.Pending == nil || !*v.Pending || !v.PendingUnwritten || v.PendingSource != v1alpha1.PendingSourceUser {
		t.Fatalf("pending %v unwritten %v source %q, want true, true, User", v.Pending, v.PendingUnwritten, v.PendingSource)
	}
	var out bytes.Buffer
	if err := printStatus(&out, v, changed); err != nil {
		t.Fatal(err)
	}
	if want := "true (on) at the agent's next step boundary (selected during the turn; the manager writes it when the agent reaches it)"; !strings.Contains(out.String(), want) {
		t.Errorf("status has no %q:\n%s", want, out.String())
	}
	// Taken on and committed: nothing waits.
	as.Status.ObservedGeneration, as.Status.PlanMode.Selection, as.Status.PlanMode.Active = 4, bp(true), true
	if v := viewOf(as); v.Pending != nil {
		t.Errorf("pending %v after the commit, want none", *v.Pending)
	}
}
