package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

const (
	timeout  = 20 * time.Second
	interval = 25 * time.Millisecond
	// quiet is how long Consistently watches for writes that must not happen.
	quiet       = 1500 * time.Millisecond
	testSection = "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."
	agentOwner  = "planmode-agent"
)

// backend is one session-log backend: the manager and the agent get separate handles (as
// separate processes would), on the same database.
type backend struct {
	name                 string
	url                  string
	mgrStore, agentStore sessionlog.Store
}

func openBackend(name string) *backend {
	b := &backend{name: name}
	switch name {
	case "sqlite":
		dir, err := os.MkdirTemp("", "controllers-sqlite-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		b.url = "sqlite://" + filepath.Join(dir, "log.db")
	case "postgres":
		url, err := pgServer.CreateDatabase(suiteCtx, "controllers_"+rand.String(8))
		Expect(err).NotTo(HaveOccurred())
		b.url = url
	default:
		Fail("unknown backend " + name)
	}
	var err error
	b.mgrStore, err = sessionlog.Open(suiteCtx, b.url)
	Expect(err).NotTo(HaveOccurred())
	b.agentStore, err = sessionlog.Open(suiteCtx, b.url)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		Expect(b.mgrStore.Close()).To(Succeed())
		Expect(b.agentStore.Close()).To(Succeed())
	})
	return b
}

// faultStore wraps the real store of the manager and can make plan/mode appends or tail reads
// fail, like an unreachable log store would.
type faultStore struct {
	sessionlog.Store
	failPlanMode atomic.Bool
	failTail     atomic.Bool
	appends      atomic.Int64 // plan/mode appends that reached the real store
	tails        atomic.Int64 // tail reads that reached the real store
	tailsFailed  atomic.Int64 // tail reads failed by failTail
	claims       atomic.Int64 // owner claims that reached the real store
	batchClaims  atomic.Int64 // claims that reached it in ClaimOwners batches
	claimedMu    sync.Mutex
	claimed      map[string]int // ClaimOwner calls by session ID
	batches      atomic.Int64   // ClaimOwners calls
	listings     atomic.Int64   // reads of every session's tail and owner (Sessions)
}

var errInjected = errors.New("injected fault: log store unavailable")

func (f *faultStore) Append(ctx context.Context, sid string, evs []harness.Event) (harness.Tail, error) {
	if len(evs) > 0 && evs[0].Type == harness.TypePlanMode {
		if f.failPlanMode.Load() {
			return harness.Tail{}, errInjected
		}
		f.appends.Add(1)
	}
	return f.Store.Append(ctx, sid, evs)
}

func (f *faultStore) Tail(ctx context.Context, sid string) (harness.Tail, error) {
	if f.failTail.Load() {
		f.tailsFailed.Add(1)
		return harness.Tail{}, errInjected
	}
	f.tails.Add(1)
	return f.Store.Tail(ctx, sid)
}

func (f *faultStore) ClaimOwner(ctx context.Context, sid string, o sessionlog.Owner) (sessionlog.Owner, error) {
	f.claims.Add(1)
	f.claimedMu.Lock()
	if f.claimed == nil {
		f.claimed = map[string]int{}
	}
	f.claimed[sid]++
	f.claimedMu.Unlock()
	return f.Store.ClaimOwner(ctx, sid, o)
}

// claimedAlone is how often the log of sid was claimed by ClaimOwner.
func (f *faultStore) claimedAlone(sid string) int {
	f.claimedMu.Lock()
	defer f.claimedMu.Unlock()
	return f.claimed[sid]
}

func (f *faultStore) ClaimOwners(ctx context.Context, claims []sessionlog.OwnerClaim) ([]sessionlog.Owner, error) {
	f.batches.Add(1)
	f.batchClaims.Add(int64(len(claims)))
	return f.Store.ClaimOwners(ctx, claims)
}

// Sessions fails with the tail reads: the store is unreachable for both.
func (f *faultStore) Sessions(ctx context.Context, fn func(sessionlog.SessionState) error) error {
	if f.failTail.Load() {
		return errInjected
	}
	f.listings.Add(1)
	return f.Store.Sessions(ctx, fn)
}

// countingClient counts the manager's API writes.
type countingClient struct {
	client.Client
	statusWrites *atomic.Int64
	otherWrites  *atomic.Int64
	failStatus   *atomic.Int64 // fail this many status writes (after counting nothing)
}

func (c countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}
func (c countingClient) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	c.otherWrites.Add(1)
	return c.Client.Create(ctx, o, opts...)
}
func (c countingClient) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	c.otherWrites.Add(1)
	return c.Client.Update(ctx, o, opts...)
}
func (c countingClient) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.otherWrites.Add(1)
	return c.Client.Patch(ctx, o, p, opts...)
}

type countingStatus struct {
	client.SubResourceWriter
	c countingClient
}

var errStatusWriteInjected = errors.New("injected fault: status write lost")

func (s countingStatus) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.c.failStatus.Load() > 0 {
		s.c.failStatus.Add(-1)
		return errStatusWriteInjected
	}
	err := s.SubResourceWriter.Patch(ctx, o, p, opts...)
	if err == nil {
		s.c.statusWrites.Add(1)
	}
	return err
}
func (s countingStatus) Update(ctx context.Context, o client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.otherWrites.Add(1)
	return s.SubResourceWriter.Update(ctx, o, opts...)
}

// testManager is one running manager with the real reconciler, scoped to one namespace.
type testManager struct {
	mgr          *framework.Manager
	r            *AgentSessionReconciler
	store        *faultStore
	statusWrites atomic.Int64
	otherWrites  atomic.Int64
	failStatus   atomic.Int64
}

type managerOptions struct {
	leaderElectionID string
	storeID          func() string // AgentSessionReconciler.StoreID
	// pendingStatusDelay is AgentSessionReconciler.PendingStatusDelay (zero: written at once).
	pendingStatusDelay time.Duration
}

func startManager(ns string, store sessionlog.Store, o managerOptions) *testManager {
	tm := &testManager{store: &faultStore{Store: store}}
	mgr, err := framework.StartManager(suiteCtx, cfg, framework.ManagerOptions{
		Scheme:           scheme,
		Namespace:        ns,
		LeaderElectionID: o.leaderElectionID,
		Tune: func(opts *ctrl.Options) {
			opts.NewClient = func(c *rest.Config, opts client.Options) (client.Client, error) {
				cl, err := client.New(c, opts)
				if err != nil {
					return nil, err
				}
				return countingClient{Client: cl, statusWrites: &tm.statusWrites, otherWrites: &tm.otherWrites, failStatus: &tm.failStatus}, nil
			}
		},
		Setup: func(mgr ctrl.Manager) error {
			tm.r = &AgentSessionReconciler{
				Client:             mgr.GetClient(),
				Store:              tm.store,
				Recorder:           mgr.GetEventRecorder(FieldManager),
				MaxStoreBackoff:    500 * time.Millisecond,
				StoreID:            o.storeID,
				PendingStatusDelay: o.pendingStatusDelay,
			}
			return tm.r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4})
		},
	})
	Expect(err).NotTo(HaveOccurred())
	tm.mgr = mgr
	DeferCleanup(tm.stop)
	return tm
}

func (tm *testManager) stop() {
	GinkgoHelper()
	Expect(tm.mgr.Stop()).To(Succeed())
}

func (tm *testManager) elected() bool { return tm.mgr.Elected() }

// newNamespace creates a namespace with the default PlanModeConfig.
func newNamespace(withConfig bool) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "planmode-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	if withConfig {
		createConfig(ns.Name, agentsv1alpha1.DefaultPlanModeConfigName)
	}
	return ns.Name
}

func createConfig(ns, name string) {
	cfg := &agentsv1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: testSection},
	}
	Expect(k8sClient.Create(suiteCtx, cfg)).To(Succeed())
}

// agent is the test's stand-in for an agent pod: it appends its own events through its own
// store handle and talks to the manager only through status.agent.boundary, following the
// rules of docs/protocol.md.
type agent struct {
	store     sessionlog.Store
	key       types.NamespacedName
	sid       string
	notices   []string // notices recorded in the log
	apiWrites int      // status.agent writes this agent made
}

func newSession(ns, name string, active *bool, fork *agentsv1alpha1.ForkSource, store sessionlog.Store) *agent {
	sid := ns + "." + name
	as := &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentsv1alpha1.AgentSessionSpec{
			SessionID: sid,
			PlanMode:  agentsv1alpha1.PlanModeSpec{Active: active},
			Fork:      fork,
		},
	}
	Expect(k8sClient.Create(suiteCtx, as)).To(Succeed())
	return &agent{store: store, key: client.ObjectKeyFromObject(as), sid: sid}
}

func (a *agent) get() *agentsv1alpha1.AgentSession {
	var as agentsv1alpha1.AgentSession
	Expect(k8sClient.Get(suiteCtx, a.key, &as)).To(Succeed())
	return &as
}

func (a *agent) tail() harness.Tail {
	t, err := a.store.Tail(suiteCtx, a.sid)
	Expect(err).NotTo(HaveOccurred())
	return t
}

func (a *agent) events() []harness.Event {
	evs, err := a.store.ReadFrom(suiteCtx, a.sid, 0, 0)
	Expect(err).NotTo(HaveOccurred())
	return evs
}

// planModes returns the plan/mode events in the log.
func (a *agent) planModes() []harness.Event {
	var out []harness.Event
	for _, e := range a.events() {
		if e.Type == harness.TypePlanMode {
			out = append(out, e)
		}
	}
	return out
}

func (a *agent) seqOf(typ string) []int64 {
	var out []int64
	for _, e := range a.events() {
		if e.Type == typ {
			out = append(out, e.Seq)
		}
	}
	return out
}

func (a *agent) append(evs ...harness.Event) harness.Tail {
	GinkgoHelper()
	t, err := a.store.Append(suiteCtx, a.sid, harness.Sequence(a.tail().NextSeq, evs...))
	Expect(err).NotTo(HaveOccurred())
	return t
}

func (a *agent) startTurn(turn int64) {
	a.append(harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: turn}))
}

// endTurn ends turn 1 (each test's sessions run one turn before a toggle) with the given kind.
func (a *agent) endTurn(kind string) {
	a.append(harness.MustEvent(harness.TypeTurnEnd, harness.TurnEnd{Turn: 1, Reason: harness.TurnEndReason{Kind: kind}}))
}

func (a *agent) endStep(turn, step int64) {
	a.append(harness.MustEvent(harness.TypeStepEnd, harness.StepEnd{Turn: turn, Step: step}))
}

// header logs a request/header whose system text carries the plan section iff plan is on.
func (a *agent) header(plan bool, reason string) {
	system := "You are a coding agent."
	if plan {
		system += "\n\n" + testSection
	}
	h := harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "test", Model: "m"}, System: system}
	a.append(harness.MustEvent(harness.TypeRequestHeader, harness.RequestHeader{Header: h, Reason: reason}))
}

// report writes a step boundary into status.agent with the agent's field manager.
func (a *agent) report(turn, step, seq int64) {
	GinkgoHelper()
	now := metav1.Now()
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"agent": map[string]any{
		"boundary": agentsv1alpha1.StepBoundary{Turn: turn, Step: step, Seq: seq, Time: &now}}}})
	as := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: a.key.Namespace, Name: a.key.Name}}
	Expect(k8sClient.Status().Patch(suiteCtx, as, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(agentOwner))).To(Succeed())
	a.apiWrites++
}

// awaitAck waits for the acknowledgement of (turn, step, seq).
func (a *agent) awaitAck(turn, step, seq int64) *agentsv1alpha1.BoundaryAck {
	GinkgoHelper()
	var ack *agentsv1alpha1.BoundaryAck
	Eventually(func(g Gomega) {
		lb := a.get().Status.PlanMode.LastBoundary
		g.Expect(lb).NotTo(BeNil())
		g.Expect([]int64{lb.Turn, lb.Step, lb.Seq}).To(Equal([]int64{turn, step, seq}))
		ack = lb
	}, timeout, interval).Should(Succeed())
	return ack
}

// stepResult is what the agent learnt at a boundary.
type stepResult struct {
	committed bool
	notice    string
	asked     bool
	ack       *agentsv1alpha1.BoundaryAck
	failed    bool
}

// boundary runs the SDK's boundary rule (docs/protocol.md): ask the manager only when a
// selection is pending or not yet taken on, or a plan/mode is not yet covered by the status;
// otherwise read the committed state from the tail with no API write. On admission it logs
// step/start, the notice (last message) and a request/header shaped by the committed state.
func (a *agent) boundary(turn, step int64) stepResult {
	GinkgoHelper()
	t := a.tail()
	as := a.get()
	pm := as.Status.PlanMode
	sel := as.Spec.PlanMode.Active
	mustAsk := pm.Pending ||
		(sel != nil && (pm.Selection == nil || *pm.Selection != *sel)) ||
		(t.LastPlanModeSeq > t.LastStepStartSeq && pm.NextSeq <= t.LastPlanModeSeq)
	var res stepResult
	if mustAsk {
		res.asked = true
		a.report(turn, step, t.NextSeq)
		res.ack = a.awaitAck(turn, step, t.NextSeq)
		if res.ack.Result == agentsv1alpha1.BoundaryFailed {
			res.failed = true
			return res
		}
		res.committed, res.notice = res.ack.Active, res.ack.Notice
		Expect(a.tail().NextSeq).To(Equal(res.ack.NextSeq), "the ack's nextSeq is where step/start goes")
	} else {
		res.committed = t.Active
		if n := pm.Notice; n != nil && n.Seq == t.LastPlanModeSeq && t.LastPlanModeSeq > t.LastStepStartSeq {
			res.notice = n.Text
		}
	}
	evs := []harness.Event{
		harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: turn, Step: step}),
		harness.MustEvent(harness.TypeUserMessage, harness.NewUserText(rand.String(8), fmt.Sprintf("input %d.%d", turn, step))),
	}
	if res.notice != "" {
		evs = append(evs, harness.MustEvent(harness.TypeUserMessage, harness.NewPluginNotice(rand.String(8), harness.NoticeSourcePlugin, res.notice)))
		a.notices = append(a.notices, res.notice)
	}
	a.append(evs...)
	reason := harness.HeaderReasonChange
	if told := t.LastShown; told == nil {
		reason = harness.HeaderReasonInitial
	}
	a.header(res.committed, reason)
	return res
}

// setActive patches spec.planMode.active (the user's toggle).
func setActive(key types.NamespacedName, v *bool) {
	GinkgoHelper()
	var val any
	if v != nil {
		val = *v
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"planMode": map[string]any{"active": val}}})
	as := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	Expect(k8sClient.Patch(suiteCtx, as, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// awaitStatus waits until the manager has acted on the current generation and the status says
// active/pending as given.
func (a *agent) awaitStatus(active, pending bool) *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	var as *agentsv1alpha1.AgentSession
	Eventually(func(g Gomega) {
		as = a.get()
		g.Expect(as.Status.ObservedGeneration).To(Equal(as.Generation))
		g.Expect(as.Status.PlanMode.Active).To(Equal(active), "status.planMode.active")
		g.Expect(as.Status.PlanMode.Pending).To(Equal(pending), "status.planMode.pending")
		if as.Spec.PlanMode.Active != nil {
			g.Expect(as.Status.PlanMode.Selection).To(Equal(as.Spec.PlanMode.Active))
		}
	}, timeout, interval).Should(Succeed())
	return as
}

func readyMessage(as *agentsv1alpha1.AgentSession) string {
	if c := findCond(as.Status.Conditions, agentsv1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

func readyReason(as *agentsv1alpha1.AgentSession) string {
	if c := findCond(as.Status.Conditions, agentsv1alpha1.ConditionReady); c != nil {
		return string(c.Status) + "/" + c.Reason
	}
	return ""
}

// eventReasons lists the reasons of the events.k8s.io Events about a session.
func eventReasons(key types.NamespacedName) []string {
	var list eventsv1.EventList
	Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(key.Namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == key.Name {
			out = append(out, e.Type+"/"+e.Reason)
		}
	}
	return out
}

func activeValues(evs []harness.Event) []bool {
	out := make([]bool, 0, len(evs))
	for _, e := range evs {
		a, err := harness.DecodePlanMode(e.Data)
		Expect(err).NotTo(HaveOccurred())
		out = append(out, a)
	}
	return out
}

// expectWrites waits for a write counter to reach want and checks that it stays there (the
// apiserver may show a write before the writer's call has returned and been counted).
func expectWrites(c *atomic.Int64, want int64, what string) {
	GinkgoHelper()
	Eventually(c.Load, timeout, interval).Should(Equal(want), what)
	Consistently(c.Load, quiet, interval).Should(Equal(want), what)
}

// stableWrites returns a write counter once it has stopped moving.
func stableWrites(c *atomic.Int64) int64 {
	GinkgoHelper()
	var last int64 = -1
	Eventually(func() bool {
		v := c.Load()
		same := v == last
		last = v
		return same
	}, timeout, 300*time.Millisecond).Should(BeTrue())
	return last
}

// pendingInTurn creates a session that ran step 1 of turn 1 and has plan mode on selected since,
// pending for the agent's next step boundary.
func pendingInTurn(ns, name string, store sessionlog.Store) *agent {
	GinkgoHelper()
	a := newSession(ns, name, nil, nil, store)
	a.awaitStatus(false, false)
	a.startTurn(1)
	a.boundary(1, 1)
	a.endStep(1, 1)
	setActive(a.key, T)
	a.awaitStatus(false, true)
	return a
}
