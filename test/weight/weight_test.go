// Package weight measures what an AgentSession's size costs the API server per write: the
// session as the scale benchmark's storms leave it (a fresh session toggled once), against the
// same session after a plan review, and after a long life (many toggles by stamped identities,
// many plan revisions). Every write of a session carries the whole object through the API
// server's decoding, validation, managed fields and encoding, and to every watcher, so what a
// session keeps in its object is paid again at every toggle and every step boundary answered.
// BenchmarkTakeOnWrite measures the same for a first start's one write per session: the
// manager's first status beside the floor's.
package weight

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// planBytes is the size of the plan posted for review: a markdown plan of a few sections.
const planBytes = 4096

// batchWrites is how many writes go to one shape between two reads of the API server's CPU,
// which the kernel counts in 10 ms ticks.
const batchWrites = 20

// shape is one session's life so far, written into a fresh AgentSession.
type shape struct {
	name  string
	build func(s *agentsv1alpha1.AgentSession)
}

var shapes = []shape{
	{"fresh (the storms' session)", fresh},
	{"after a plan review", func(s *agentsv1alpha1.AgentSession) { fresh(s); reviewed(s, 1) }},
	{"the same, without the agent's post", func(s *agentsv1alpha1.AgentSession) { fresh(s); reviewed(s, 1); s.Status.Agent.Review = nil }},
	{"busy (10 stamped toggles, 20 revisions)", func(s *agentsv1alpha1.AgentSession) { fresh(s); reviewed(s, 20); stampedToggles(s, 10) }},
}

// BenchmarkStatusWriteByObjectWeight writes one small status change (a boundary answer's seq)
// to sessions of each shape, in rounds of batchWrites writes per shape, rotating which shape goes
// first, and reports for each shape its median write time and the API server's CPU per write
// (its process's CPU over the shape's batches), with their ratios to the fresh session's and
// its object's size.
func BenchmarkStatusWriteByObjectWeight(b *testing.B) {
	ctx := context.Background()
	const ns = "weight"
	c, api := startAPIServer(ctx, b, ns)
	keys := make([]types.NamespacedName, len(shapes))
	for i, sh := range shapes {
		keys[i] = create(ctx, b, c, ns, fmt.Sprintf("s-%d", i), sh)
	}
	seq := int64(5)
	write := func(key types.NamespacedName) time.Duration {
		patch := fmt.Sprintf(`{"status":{"planMode":{"nextSeq":%d,"lastBoundary":{"seq":%d,"nextSeq":%d}}}}`, seq+1, seq, seq+1)
		start := time.Now()
		obj := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("planmode-manager")); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 20 { // warm the connection and the API server's caches
		for _, k := range keys {
			write(k)
		}
		seq++
	}
	samples, cpu := rounds(b, api, len(keys), nil, func(i int) []time.Duration {
		var d []time.Duration
		for range batchWrites {
			d = append(d, write(keys[i]))
			seq++
		}
		return d
	})
	var report strings.Builder
	n := time.Duration(len(samples[0]))
	base, baseCPU, baseSize := median(samples[0]), cpu[0]/n, served(ctx, b, c, keys[0])
	for i, sh := range shapes {
		m, perWrite, size := median(samples[i]), cpu[i]/n, served(ctx, b, c, keys[i])
		metric := fmt.Sprint(i)
		b.ReportMetric(float64(m.Microseconds()), "us/write-shape"+metric)
		b.ReportMetric(float64(perWrite.Microseconds()), "apiserver-cpu-us/write-shape"+metric)
		b.ReportMetric(float64(size), "bytes-shape"+metric)
		fmt.Fprintf(&report, "%-42s %7d bytes %5.2fx   write median %8s %5.2fx   API server CPU/write %8s %5.2fx\n", sh.name, size, float64(size)/float64(baseSize),
			m.Round(time.Microsecond), float64(m)/float64(base), perWrite.Round(time.Microsecond), float64(perWrite)/float64(baseCPU))
	}
	b.Logf("shapes 0 to %d in order; %d writes of each shape, plan %d bytes:\n%s", len(shapes)-1, len(samples[0]), planBytes, report.String())
}

// takeOns are the first status writes of a session just created, as each side's process
// makes them at a first start: the floor's (observedGeneration and its echo of the log's end)
// and the manager's (the same with the Ready condition, the config in force and the log
// store's identity, which its status promises from the first write, and the resourceVersion
// it read the session at as a precondition, as its first write after a start carries one).
// The last two set the precondition's part apart from the content's: the manager's write
// without it, and the floor's with it. readAt stands for that resourceVersion.
var takeOns = []struct{ name, patch string }{
	{"floor's take-on", `{` + floorTakeOn + `}`},
	{"manager's take-on", `{` + precondition + `,` + managerTakeOn + `}`},
	{"manager's, no precondition", `{` + managerTakeOn + `}`},
	{"floor's, with precondition", `{` + precondition + `,` + floorTakeOn + `}`},
}

const (
	floorTakeOn   = `"status":{"observedGeneration":1,"planMode":{"active":false,"nextSeq":0,"turnOpen":false}}`
	managerTakeOn = `"status":{"conditions":[{"lastTransitionTime":"2026-12-08T00:45:01Z","message":"","observedGeneration":1,` +
		`"reason":"InSync","status":"True","type":"Ready"}],"observedGeneration":1,"planMode":{"active":false,` +
		`"config":{"generation":1,"name":"default","sectionSHA256":"ace1e579581a9cf5"},"pending":false,"storeID":"2852a79fbe55795772fd3eb7e19f0061"}}`
	precondition = `"metadata":{"resourceVersion":"` + readAt + `"}`
)

const readAt = "READ-AT"

// BenchmarkTakeOnWrite writes each of takeOns to sessions created just before (no status
// yet), in rounds of batchWrites sessions each, rotating which goes first, and reports for each
// its median write time and the API server's CPU per write, with their ratios to the floor's:
// what one session of a first start costs the API server, apart from everything else a first
// start does.
func BenchmarkTakeOnWrite(b *testing.B) {
	ctx := context.Background()
	const ns = "takeon"
	c, api := startAPIServer(ctx, b, ns)
	count := 0
	newSessions := func() []*agentsv1alpha1.AgentSession {
		made := make([]*agentsv1alpha1.AgentSession, batchWrites)
		for i := range made {
			count++
			s := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s-%d", count)}}
			s.Spec.SessionID = fmt.Sprintf("%s-%d", ns, count)
			if err := c.Create(ctx, s); err != nil {
				b.Fatal(err)
			}
			made[i] = s
		}
		return made
	}
	write := func(s *agentsv1alpha1.AgentSession, patch string) time.Duration {
		body := []byte(strings.Replace(patch, readAt, s.ResourceVersion, 1))
		start := time.Now()
		obj := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name}}
		if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner("planmode-manager")); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, t := range takeOns { // warm the connection and the API server's caches
		for _, s := range newSessions() {
			write(s, t.patch)
		}
	}
	var sessions []*agentsv1alpha1.AgentSession
	samples, cpu := rounds(b, api, len(takeOns), func(int) { sessions = newSessions() }, func(i int) []time.Duration {
		var d []time.Duration
		for _, s := range sessions {
			d = append(d, write(s, takeOns[i].patch))
		}
		return d
	})
	var report strings.Builder
	n := time.Duration(len(samples[0]))
	base, baseCPU := median(samples[0]), cpu[0]/n
	for i, t := range takeOns {
		m, perWrite := median(samples[i]), cpu[i]/n
		b.ReportMetric(float64(m.Microseconds()), fmt.Sprintf("us/write-takeon%d", i))
		b.ReportMetric(float64(perWrite.Microseconds()), fmt.Sprintf("apiserver-cpu-us/write-takeon%d", i))
		fmt.Fprintf(&report, "%-28s patch %4d bytes   write median %8s %5.2fx   API server CPU/write %8s %5.2fx\n", t.name, len(t.patch),
			m.Round(time.Microsecond), float64(m)/float64(base), perWrite.Round(time.Microsecond), float64(perWrite)/float64(baseCPU))
	}
	b.Logf("%d first writes of each, ratios to the floor's:\n%s", len(samples[0]), report.String())
}

// rounds runs the benchmark's loop: each round makes a batch of writes of each of n kinds, the
// kind that goes first rotating, and returns each kind's write times and the API server's CPU
// over its batches. prepare(i), when set, runs before kind i's batch with the timer stopped.
func rounds(b *testing.B, api, n int, prepare func(i int), batch func(i int) []time.Duration) ([][]time.Duration, []time.Duration) {
	samples := make([][]time.Duration, n)
	cpu := make([]time.Duration, n)
	b.ResetTimer()
	round := 0
	for b.Loop() {
		for k := range n {
			i := (k + round) % n
			if prepare != nil {
				b.StopTimer()
				prepare(i)
				b.StartTimer()
			}
			before := framework.ProcessCPU(api)
			samples[i] = append(samples[i], batch(i)...)
			cpu[i] += framework.ProcessCPU(api) - before
		}
		round++
	}
	b.StopTimer()
	return samples, cpu
}

// startAPIServer starts an envtest API server with the module's CRDs for the benchmark, and
// returns a client of it with namespace ns made, and the API server's process id.
func startAPIServer(ctx context.Context, b *testing.B, ns string) (client.Client, int) {
	b.Helper()
	logf.SetLogger(logr.Discard()) // envtest's start-up lines say nothing these figures need
	env, cfg, err := framework.Start(framework.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	sch := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		b.Fatal(err)
	}
	if err := agentsv1alpha1.AddToScheme(sch); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	api, err := framework.APIServerPID(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return c, api
}

// create makes a session of shape sh, its spec and status as the shape's life left them.
func create(ctx context.Context, b *testing.B, c client.Client, ns, name string, sh shape) types.NamespacedName {
	b.Helper()
	s := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	s.Spec.SessionID = ns + "-" + name
	sh.build(s)
	status := s.Status
	if err := c.Create(ctx, s); err != nil {
		b.Fatalf("create %s: %v", sh.name, err)
	}
	s.Status = status
	s.Status.ObservedGeneration = s.Generation
	for i := range s.Status.Conditions {
		s.Status.Conditions[i].ObservedGeneration = s.Generation
	}
	if err := c.Status().Update(ctx, s, client.FieldOwner("planmode-manager")); err != nil {
		b.Fatalf("write the status of %s: %v", sh.name, err)
	}
	return client.ObjectKeyFromObject(s)
}

// served is the session's size as the API server serves it (managedFields included), as
// compact JSON.
func served(ctx context.Context, b *testing.B, c client.Client, key types.NamespacedName) int {
	b.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(agentsv1alpha1.AgentSessionKind)
	if err := c.Get(ctx, key, u); err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

var (
	at  = metav1.NewTime(time.Date(2026, 12, 2, 6, 6, 25, 0, time.UTC))
	yes = true
	no  = false
)

// fresh is the session the storms leave: plan mode on, committed at a step boundary.
func fresh(s *agentsv1alpha1.AgentSession) {
	s.Spec.PlanMode.Active = &yes
	s.Status.Agent = &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 1, Step: 2, Seq: 5, Time: &at}}
	s.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "InSync", LastTransitionTime: at}}
	s.Status.PlanMode = agentsv1alpha1.PlanModeStatus{
		Active: true, Selection: &yes, NextSeq: 6, StoreID: "e461fc97411c90ad3a11103f425c069d", TurnOpen: true, ToldActive: &no,
		Config:             &agentsv1alpha1.ConfigInForce{Name: "default", Generation: 1, SectionSHA256: "a8f1e11ffea37a9a"},
		LastTransitionTime: &at,
		Notice:             &agentsv1alpha1.OwedNotice{Seq: 5, Text: "The user switched this session to plan mode."},
		LastBoundary: &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 2, Seq: 5, Result: agentsv1alpha1.BoundaryAdmitted, Active: true, NextSeq: 6,
			Notice: "The user switched this session to plan mode.", Time: at},
		Changes: []agentsv1alpha1.PlanModeChange{{Seq: 5, Active: true, Cause: agentsv1alpha1.PlanModeChangeSelection}},
	}
}

var (
	toggler = agentsv1alpha1.Actor{Username: "system:serviceaccount:team-a:toggler", UID: "4f8c1e2a-1b2c-4d5e-8f90-123456789abc",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}}
	reviewer = agentsv1alpha1.Actor{Username: "rita@example.com", Groups: []string{"oidc:platform", "system:authenticated"}}
)

// reviewed adds what n posted plans leave, the last approved: the agent's post of the last plan
// (it stays, as the record), the closed review, the revisions, and the reviewer's vote in spec.
func reviewed(s *agentsv1alpha1.AgentSession, n int) {
	plan := "# Fix the flaky session-log test\n\n" + strings.Repeat("- Step: read the code, change it, run the tests again.\n", planBytes/54)
	digest := planmode.PlanSHA256(plan)
	id := fmt.Sprintf("r%d", n)
	s.Status.Agent.Review = &agentsv1alpha1.PlanReviewRequest{ID: id, Plan: plan, Turn: 1, RequestedAt: &at}
	s.Spec.PlanMode.SelectedBy, s.Spec.PlanMode.SelectedAt = toggler.DeepCopy(), &at
	s.Spec.ReviewVotes = []agentsv1alpha1.ReviewDecision{{ReviewID: id, Decision: agentsv1alpha1.ReviewApprove, PlanSHA256: digest, DecidedBy: reviewer.DeepCopy(), DecidedAt: &at}}
	s.Status.Review = &agentsv1alpha1.ReviewStatus{ID: id, Phase: agentsv1alpha1.ReviewApproved, DecidedAt: &at, PlanSHA256: digest, Revision: int64(n),
		OpenedAt: &at, PostedBy: "system:serviceaccount:team-a:agent", Requester: toggler.DeepCopy(), Policy: "team-a/default", ApprovalsRequired: 1, Approvals: 1,
		Votes: []agentsv1alpha1.ReviewVoteStatus{{Decision: agentsv1alpha1.ReviewApprove, By: reviewer, At: &at, Counted: true}}}
	for i := 1; i <= n; i++ {
		phase := agentsv1alpha1.ReviewKeptPlanning
		if i == n {
			phase = agentsv1alpha1.ReviewApproved
		}
		s.Status.ReviewHistory = append(s.Status.ReviewHistory, agentsv1alpha1.ReviewRevision{Revision: int64(i), ReviewID: fmt.Sprintf("r%d", i),
			PlanSHA256: digest, Title: "Fix the flaky session-log test", PostedAt: at, Phase: phase, DecidedAt: &at, DecidedBy: []string{reviewer.Username}})
	}
}

// stampedToggles adds n plan/mode changes selected by a service account, as the admission
// webhook stamps them; the status keeps the last agentsv1alpha1.MaxPlanModeChanges.
func stampedToggles(s *agentsv1alpha1.AgentSession, n int) {
	for i := range n {
		s.Status.PlanMode.Changes = append(s.Status.PlanMode.Changes, agentsv1alpha1.PlanModeChange{Seq: int64(10 + i), Active: i%2 == 0,
			Cause: agentsv1alpha1.PlanModeChangeSelection, By: toggler.DeepCopy()})
	}
	if over := len(s.Status.PlanMode.Changes) - agentsv1alpha1.MaxPlanModeChanges; over > 0 {
		s.Status.PlanMode.Changes = s.Status.PlanMode.Changes[over:]
	}
}
