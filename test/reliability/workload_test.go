package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/webhooks"
)

const section = "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."

// agentScript: a turn of three steps (one with a tool call), then a pause between turns, so
// the driver's toggles land both during turns (queued for a boundary) and between them
// (committed at once).
const agentScript = `turn work on it
step
tool read
step
step
end
sleep 40ms
`

// workload is one namespace of AgentSessions with a reference agent each, a driver toggling
// their selections, and a recorder of every boundary answer the manager publishes.
type workload struct {
	ns       string
	storeURL string
	store    sessionlog.Store // the agents' (and the checker's) connection to the log
	agentCfg *rest.Config     // how the agents reach the API server
	user     client.Client    // the driver's client: the user reaches the API server directly
	names    []string
	acks     *ackRecorder

	agentsCtx    context.Context
	agentsCancel context.CancelFunc
	agentsWG     sync.WaitGroup
	driverCancel context.CancelFunc
	driverWG     sync.WaitGroup

	// driverSkip: sessions the driver leaves alone (a spec's own selection under test).
	driverSkip map[string]bool

	steps, failedProposals, agentRestarts, toggles atomic.Int64
	// lastProposalErr is the error of the last failed proposal, for a failure's message.
	lastProposalErr atomic.Value
	// unanswered, adopted: steps that went on without the manager's answer (protocol v2), and
	// those that then took the manager's plan/mode; maxBoundary: the longest boundary (ns).
	unanswered, adopted, maxBoundary atomic.Int64
}

// suiteAgentCfg is the suite's agent identity (a package variable the parameter shadows).
func suiteAgentCfg() *rest.Config { return agentCfg }

func newWorkload(prefix string, sessions int, storeURL string, agentCfg *rest.Config) *workload {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(k8s.Create(suiteCtx, ns)).To(Succeed())
	Expect(createAdmitted(k8s, &v1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: v1alpha1.DefaultPlanModeConfigName},
		Spec:       v1alpha1.PlanModeConfigSpec{Section: section},
	})).To(Succeed())
	store, err := sessionlog.Open(suiteCtx, storeURL, sessionlog.CallTimeout(storeTimeout))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = store.Close() })
	if agentCfg == nil {
		agentCfg = suiteAgentCfg()
	}
	user, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w := &workload{ns: ns.Name, storeURL: storeURL, store: store, agentCfg: agentCfg, user: user}
	for i := 0; i < sessions; i++ {
		name := fmt.Sprintf("s%d", i)
		Expect(createAdmitted(k8s, &v1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name},
			Spec:       v1alpha1.AgentSessionSpec{SessionID: ns.Name + "." + name, Agent: &v1alpha1.AgentBinding{ServiceAccountName: agentServiceAccount(name)}},
		})).To(Succeed())
		w.names = append(w.names, name)
	}
	w.acks = startAckRecorder(ns.Name)
	DeferCleanup(w.stop)
	return w
}

// webhookCallRetry is how a spec's setup tries a write again when the API server could not
// call the webhook.
var webhookCallRetry = wait.Backoff{Steps: 6, Duration: 50 * time.Millisecond, Factor: 2}

// createAdmitted creates obj through the admission webhooks, as a user's script that tries
// again would. The API server keeps its connections to the webhook Service alive, and one
// forwarded to a manager that an earlier spec stopped closes under the next call: the write
// fails as an InternalError ("failed calling webhook") and nothing is stored, which is what a
// cluster does when a webhook pod dies; retrying is the client's part. Taking a manager out of
// the gateway (only) closes its connections the same way.
func createAdmitted(c client.Client, obj client.Object) error {
	return throughWebhooks(func() error { return c.Create(suiteCtx, obj) })
}

// throughWebhooks sends a write that the admission webhooks answer, tried again as
// createAdmitted says; the webhooks' own answers (a refusal included) come back at once.
func throughWebhooks(write func() error) error {
	return retry.OnError(webhookCallRetry, apierrors.IsInternalError, write)
}

func (w *workload) sessionID(name string) string { return w.ns + "." + name }

// agentServiceAccount is the service account session name's agent runs as: each session is
// bound to one of its own (spec.agent), as the webhook requires by default.
func agentServiceAccount(name string) string {
	return webhooks.DefaultAgentServiceAccountPrefix + "-" + name
}

// agentUsername is the API server's name for that service account.
func (w *workload) agentUsername(name string) string {
	return "system:serviceaccount:" + w.ns + ":" + agentServiceAccount(name)
}

// agentConfigFor is how session name's agent reaches the API server: w.agentCfg's connection,
// as its bound service account (impersonated; in system:masters, so RBAC lets it through and
// the webhook's binding is what holds it to its session).
func (w *workload) agentConfigFor(name string) *rest.Config {
	c := rest.CopyConfig(w.agentCfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: w.agentUsername(name), Groups: []string{"system:masters", "system:authenticated"}}
	return c
}

// agentKubeconfigFor writes, for an agent process, a kubeconfig of agentConfigFor(name).
func (w *workload) agentKubeconfigFor(name string) string {
	GinkgoHelper()
	raw, err := clientcmd.LoadFromFile(agentKubeconfig)
	Expect(err).NotTo(HaveOccurred())
	for _, u := range raw.AuthInfos {
		u.Impersonate, u.ImpersonateGroups = w.agentUsername(name), []string{"system:masters", "system:authenticated"}
	}
	path := filepath.Join(workDir, fmt.Sprintf("kubeconfig-agent-%s-%s", w.ns, name))
	Expect(clientcmd.WriteToFile(*raw, path)).To(Succeed())
	return path
}

func (w *workload) get(name string) *v1alpha1.AgentSession {
	GinkgoHelper()
	s := &v1alpha1.AgentSession{}
	Expect(k8s.Get(suiteCtx, types.NamespacedName{Namespace: w.ns, Name: name}, s)).To(Succeed())
	return s
}

// startAgents runs one reference agent per session until stopAgents. An agent whose run ends
// with an error (log store or API server unreachable) has its open turn closed the way the
// harness repairs a crashed session (turn/end {interrupted}) and starts again.
func (w *workload) startAgents() {
	script, err := refagent.ParseScript(strings.NewReader(agentScript))
	Expect(err).NotTo(HaveOccurred())
	w.agentsCtx, w.agentsCancel = context.WithCancel(suiteCtx)
	for _, name := range w.names {
		w.agentsWG.Add(1)
		go func() {
			defer GinkgoRecover()
			defer w.agentsWG.Done()
			w.runAgent(name, script)
		}()
	}
}

func (w *workload) runAgent(name string, script refagent.Script) {
	ctx := w.agentsCtx
	for ctx.Err() == nil {
		c, err := agentsdk.New(ctx, agentsdk.Options{Config: w.agentConfigFor(name), Namespace: w.ns, Name: name, Store: w.store, SyncTimeout: 10 * time.Second})
		if err == nil {
			// Run returns when a fault breaks the agent; its error is the fault's, and the loop
			// restarts the agent as its supervisor would.
			_, _ = refagent.Run(ctx, refagent.Options{
				Client: c, Script: script, Loop: true, StepDelay: 10 * time.Millisecond, BoundaryTimeout: 2 * time.Second,
				OnStep: func(r refagent.StepRecord) {
					if r.Err != nil {
						w.lastProposalErr.Store(fmt.Sprintf("%s, turn %d step %d: %v", name, r.Turn, r.Step, r.Err))
						w.failedProposals.Add(1)
					} else {
						w.steps.Add(1)
					}
					w.recordBoundary(r)
				},
			})
			c.Close()
		}
		if ctx.Err() != nil {
			return
		}
		w.agentRestarts.Add(1)
		_ = w.closeOpenTurn(ctx, name)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond): // back off before the agent process "restarts"
		}
	}
}

// closeOpenTurn is the harness's crash repair: an open trailing turn is closed with
// turn/end {interrupted}. Only called while no agent runs the session.
func (w *workload) closeOpenTurn(ctx context.Context, name string) error {
	id := w.sessionID(name)
	var last error
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		t, err := w.store.Tail(ctx, id)
		if err == nil && !t.TurnOpen {
			return nil
		}
		if err == nil {
			ev := agentsdk.TurnEnd(t.Turn, harness.TurnEndReason{Kind: "interrupted"})
			ev.Seq = t.NextSeq
			if _, err = w.store.Append(ctx, id, []harness.Event{ev}); err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return last
}

func (w *workload) stopAgents() {
	if w.agentsCancel == nil {
		return
	}
	w.agentsCancel()
	w.agentsWG.Wait()
	w.agentsCancel = nil
	for _, name := range w.names {
		Expect(w.closeOpenTurn(suiteCtx, name)).To(Succeed())
	}
}

// abandonAgents stops the agents without repairing their open turns (their store is gone).
func (w *workload) abandonAgents() {
	if w.agentsCancel == nil {
		return
	}
	w.agentsCancel()
	w.agentsWG.Wait()
	w.agentsCancel = nil
}

// startDriver runs patchers that toggle random sessions' spec.planMode.active, each perPatcher
// times (0: until stopDriver), pausing up to pause between patches.
func (w *workload) startDriver(patchers, perPatcher int, pause time.Duration) {
	ctx, cancel := context.WithCancel(suiteCtx)
	w.driverCancel = cancel
	for p := 0; p < patchers; p++ {
		w.driverWG.Add(1)
		go func() {
			defer GinkgoRecover()
			defer w.driverWG.Done()
			for i := 0; perPatcher == 0 || i < perPatcher; i++ {
				if ctx.Err() != nil {
					return
				}
				name := w.names[rand.IntN(len(w.names))]
				if w.driverSkip[name] {
					continue
				}
				obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
				patch := fmt.Appendf(nil, `{"spec":{"planMode":{"active":%t}}}`, rand.IntN(2) == 0)
				pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
				if err := w.user.Patch(pctx, obj, client.RawPatch(types.MergePatchType, patch)); err == nil {
					w.toggles.Add(1)
				}
				pcancel()
				if pause > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(time.Duration(rand.Int64N(int64(pause)))): // workload pacing
					}
				}
			}
		}()
	}
}

// waitDriver waits for patchers with a fixed count to finish.
func (w *workload) waitDriver() { w.driverWG.Wait() }

func (w *workload) stopDriver() {
	if w.driverCancel != nil {
		w.driverCancel()
		w.driverWG.Wait()
		w.driverCancel = nil
	}
}

func (w *workload) stop() {
	w.stopDriver()
	if w.agentsCancel != nil {
		w.agentsCancel()
		w.agentsWG.Wait()
	}
	w.acks.stop()
}

// converged: every session's selection is taken on and committed (nothing pending, no turn
// open, the status's committed state is the log's).
func (w *workload) converged(g Gomega) {
	for _, name := range w.names {
		s := &v1alpha1.AgentSession{}
		g.Expect(k8s.Get(suiteCtx, types.NamespacedName{Namespace: w.ns, Name: name}, s)).To(Succeed())
		pm := s.Status.PlanMode
		t, err := w.store.Tail(suiteCtx, w.sessionID(name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(t.TurnOpen).To(BeFalse(), "%s: turn open", name)
		if x := s.Spec.PlanMode.Active; x != nil {
			g.Expect(pm.Selection).To(Equal(x), "%s: selection not taken on", name)
		}
		g.Expect(pm.Pending).To(BeFalse(), "%s: still pending", name)
		g.Expect(pm.Active).To(Equal(t.Active), "%s: status active differs from the log", name)
		ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		// Ready=True, or False only for a stale boundary report an agent left when it gave up
		// waiting (answered Failed after its turn ended): nothing is stuck then.
		if ready.Status != metav1.ConditionTrue {
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonInvalidBoundary), "%s: Ready %s %s", name, ready.Reason, ready.Message)
		}
	}
}

// settle stops the driver and the agents, then waits for every session to converge under the
// manager(s) now running; it returns how long convergence took.
func (w *workload) settle(timeout time.Duration) time.Duration {
	GinkgoHelper()
	w.stopDriver()
	w.stopAgents()
	start := time.Now()
	w.flushPending(timeout)
	if !Eventually(suiteCtx, w.converged).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed()) {
		w.dump()
	}
	return time.Since(start)
}

// dump prints every session's status and log tail (for a failed convergence).
func (w *workload) dump() {
	for _, name := range w.names {
		s := w.get(name)
		b, _ := json.MarshalIndent(struct {
			Spec   v1alpha1.AgentSessionSpec
			Status v1alpha1.AgentSessionStatus
		}{s.Spec, s.Status}, "", "  ")
		evs, _ := w.store.ReadFrom(suiteCtx, w.sessionID(name), 0, 0)
		if len(evs) > 40 {
			evs = evs[len(evs)-40:]
		}
		var lines []string
		for i := range evs {
			lines = append(lines, strings.TrimSpace(string(sessionlog.AppendJSONL(nil, &evs[i]))))
		}
		GinkgoWriter.Printf("=== %s\n%s\n%s\n", name, b, strings.Join(lines, "\n"))
	}
}

// planModes counts the plan/mode events in every session's log (commits so far).
func (w *workload) planModes(g Gomega) int {
	n := 0
	for _, name := range w.names {
		evs, err := w.store.ReadFrom(suiteCtx, w.sessionID(name), 0, 0)
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range evs {
			if e.Type == harness.TypePlanMode {
				n++
			}
		}
	}
	return n
}

// outcome is what the checker found over every session of a workload.
type outcome struct {
	Violations int      `json:"violations"`
	Lost       int      `json:"selectionsLost"`
	Duplicates int      `json:"duplicates"`
	PlanModes  int      `json:"planModes"`
	Events     int      `json:"events"`
	Acks       int      `json:"acksChecked"`
	Details    []string `json:"details,omitempty"`
}

func (w *workload) check() outcome {
	GinkgoHelper()
	var o outcome
	for _, name := range w.names {
		evs, err := w.store.ReadFrom(suiteCtx, w.sessionID(name), 0, 0)
		Expect(err).NotTo(HaveOccurred())
		acks := w.acks.of(name)
		vs := invariant.Check(invariant.Input{Events: evs, Acks: acks, Final: invariant.FinalFrom(w.get(name))})
		o.Events += len(evs)
		o.Acks += len(acks)
		for _, e := range evs {
			if e.Type == harness.TypePlanMode {
				o.PlanModes++
			}
		}
		for _, v := range vs {
			o.Violations++
			switch v.Kind {
			case invariant.Duplicate, invariant.SameBoundary:
				o.Duplicates++
			case invariant.NotCommitted:
				o.Lost++
			}
			o.Details = append(o.Details, name+": "+v.String())
		}
	}
	return o
}

// row is one line of docs/reliability.md's table.
type row struct {
	Fault      string  `json:"fault"`
	Runs       int     `json:"runs"`
	Violations int     `json:"violations"`
	Lost       int     `json:"selectionsLost"`
	Duplicates int     `json:"duplicates"`
	RecoverSec float64 `json:"recoverSeconds"`
	Note       string  `json:"note,omitempty"`
	outcome
	Toggles         int64 `json:"toggles"`
	Steps           int64 `json:"steps"`
	FailedProposals int64 `json:"failedProposals"`
	AgentRestarts   int64 `json:"agentRestarts"`
	Soak            bool  `json:"soak"`
}

// writeRow records r as the spec's report entry and, with RELIABILITY_REPORT, a JSON line.
func writeRow(r row) {
	GinkgoHelper()
	b, _ := json.Marshal(r)
	AddReportEntry(r.Fault, string(b))
	GinkgoWriter.Printf("RESULT %s\n", b)
	if path := os.Getenv("RELIABILITY_REPORT"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		Expect(err).NotTo(HaveOccurred())
		_, _ = f.Write(append(b, '\n'))
		_ = f.Close()
	}
}

// report records the run's row and fails the spec on any violation.
func (w *workload) report(fault string, runs int, recovery time.Duration, note string) {
	GinkgoHelper()
	w.reportAllowing(fault, runs, recovery, note)
}

// reportAllowing is report, tolerating (but still counting and recording) violations of the
// given kinds: for a configuration outside the supported one, where a finding is documented.
func (w *workload) reportAllowing(fault string, runs int, recovery time.Duration, note string, allowed ...invariant.Kind) {
	GinkgoHelper()
	o := w.check()
	r := row{Fault: fault, Runs: runs, Violations: o.Violations, Lost: o.Lost, Duplicates: o.Duplicates,
		RecoverSec: recovery.Round(10 * time.Millisecond).Seconds(), Note: note, outcome: o,
		Toggles: w.toggles.Load(), Steps: w.steps.Load(), FailedProposals: w.failedProposals.Load(), AgentRestarts: w.agentRestarts.Load(), Soak: soak}
	writeRow(r)
	var unexpected []string
	for _, d := range o.Details {
		ok := false
		for _, k := range allowed {
			ok = ok || strings.Contains(d, " "+string(k)+":")
		}
		if !ok {
			unexpected = append(unexpected, d)
		}
	}
	if len(unexpected) > 0 {
		w.dump()
	}
	Expect(unexpected).To(BeEmpty(), "the invariant checker found violations")
	Expect(w.steps.Load()).To(BeNumerically(">", 0), "the agents ran no step: the run exercised nothing")
	Expect(o.PlanModes).To(BeNumerically(">", 0), "no selection was ever committed: the run exercised nothing")
}

// ackRecorder watches the namespace's AgentSessions and keeps every distinct boundary answer.
type ackRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acks   map[string][]invariant.Ack
	stale  map[invariant.Ack]bool // answers about a log that was replaced (reset)
}

func startAckRecorder(ns string) *ackRecorder {
	GinkgoHelper()
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(suiteCtx)
	r := &ackRecorder{cancel: cancel, done: make(chan struct{}), acks: map[string][]invariant.Ack{}}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			wi, err := wc.Watch(ctx, &v1alpha1.AgentSessionList{}, client.InNamespace(ns))
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			for ev := range wi.ResultChan() {
				if s, ok := ev.Object.(*v1alpha1.AgentSession); ok {
					r.record(s.Name, invariant.AckFrom(s.Status.PlanMode.LastBoundary))
				}
			}
			wi.Stop()
		}
	}()
	return r
}

func (r *ackRecorder) record(name string, a *invariant.Ack) {
	if a == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.acks[name]
	if n := len(list); n > 0 && list[n-1] == *a || r.stale[*a] {
		return
	}
	r.acks[name] = append(list, *a)
}

func (r *ackRecorder) of(name string) []invariant.Ack {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]invariant.Ack(nil), r.acks[name]...)
}

// reset forgets every answer recorded so far (a log that was replaced), and ignores them when
// the statuses still showing them are seen again.
func (r *ackRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stale == nil {
		r.stale = map[invariant.Ack]bool{}
	}
	for _, list := range r.acks {
		for _, a := range list {
			r.stale[a] = true
		}
	}
	clear(r.acks)
}

func (r *ackRecorder) stop() {
	r.cancel()
	<-r.done
}

// sortedKeys is for stable messages.
func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func mergePatch(s string) client.Patch { return client.RawPatch(types.MergePatchType, []byte(s)) }
