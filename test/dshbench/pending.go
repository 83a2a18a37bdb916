package main

// The phase with a selection pending: the real manager binary answers the boundaries of the
// harness with the dsh plugin and of a Go SDK agent (pkg/agentsdk, stepped as test/bench steps
// it), each on its own AgentSession, in the same run, alternating boundary by boundary.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/chatmodel"
	"github.com/harness-dev/planmode-operator/internal/freeport"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// pendingWait is both agents' boundary wait in this phase: long enough that every boundary is
// answered (an unanswered one fails the run rather than lowering a figure).
const pendingWait = 30 * time.Second

// ackTiming is one boundary report of a session and its answer, as the bench's watch saw them.
type ackTiming struct {
	turn, step, seq    int64
	reported, answered time.Time
	result             agentsv1alpha1.BoundaryResult
	active             bool
}

func (a *ackTiming) latency() time.Duration { return a.answered.Sub(a.reported) }

// ackWatch is one watch of the phase's namespace: the latest object of each session, and each
// session's boundary reports with the receipt times of the event that carried the report
// (status.agent.boundary naming a new (turn, step, seq)) and of the one that carried its
// answer (status.planMode.lastBoundary for the same (turn, step, seq)).
type ackWatch struct {
	mu      sync.Mutex
	cur     map[string]*agentsv1alpha1.AgentSession
	reports map[string][]*ackTiming
	changed chan struct{}
	err     error
}

func startAckWatch(ctx context.Context, cfg *rest.Config, ns string) (*ackWatch, error) {
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: schemeOf()})
	if err != nil {
		return nil, err
	}
	w, err := wc.Watch(ctx, &agentsv1alpha1.AgentSessionList{}, client.InNamespace(ns))
	if err != nil {
		return nil, err
	}
	a := &ackWatch{cur: map[string]*agentsv1alpha1.AgentSession{}, reports: map[string][]*ackTiming{}, changed: make(chan struct{})}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				a.fail(ctx.Err())
				return
			case ev, ok := <-w.ResultChan():
				now := time.Now()
				if !ok {
					a.fail(errors.New("the bench's watch of the AgentSessions closed"))
					return
				}
				if ev.Type == watch.Error {
					a.fail(fmt.Errorf("the bench's watch of the AgentSessions: %v", ev.Object))
					return
				}
				if s, ok := ev.Object.(*agentsv1alpha1.AgentSession); ok {
					a.observe(s, now)
				}
			}
		}
	}()
	return a, nil
}

func (a *ackWatch) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *ackWatch) observe(s *agentsv1alpha1.AgentSession, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cur[s.Name] = s
	rs := a.reports[s.Name]
	if s.Status.Agent != nil && s.Status.Agent.Boundary != nil {
		b := s.Status.Agent.Boundary
		if n := len(rs); n == 0 || rs[n-1].turn != b.Turn || rs[n-1].step != b.Step || rs[n-1].seq != b.Seq {
			rs = append(rs, &ackTiming{turn: b.Turn, step: b.Step, seq: b.Seq, reported: now})
			a.reports[s.Name] = rs
		}
	}
	if lb := s.Status.PlanMode.LastBoundary; lb != nil {
		for _, r := range rs {
			if r.answered.IsZero() && r.turn == lb.Turn && r.step == lb.Step && r.seq == lb.Seq {
				r.answered, r.result, r.active = now, lb.Result, lb.Active
			}
		}
	}
	close(a.changed)
	a.changed = make(chan struct{})
}

// waitFor waits until cond holds for the session's latest object and its reports.
func (a *ackWatch) waitFor(name string, timeout time.Duration, what string, cond func(s *agentsv1alpha1.AgentSession, reports []*ackTiming) bool) error {
	deadline := time.After(timeout)
	for {
		a.mu.Lock()
		s, rs, changed, err := a.cur[name], a.reports[name], a.changed, a.err
		ok := s != nil && cond(s, rs)
		a.mu.Unlock()
		if ok {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-changed:
		case <-deadline:
			return fmt.Errorf("session %s: %s: not seen in %s", name, what, timeout)
		}
	}
}

func (a *ackWatch) snapshot(name string) (*agentsv1alpha1.AgentSession, []*ackTiming) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur[name], slices.Clone(a.reports[name])
}

// answeredCount is the number of the session's reports answered so far.
func answeredCount(rs []*ackTiming) int {
	n := 0
	for _, r := range rs {
		if !r.answered.IsZero() {
			n++
		}
	}
	return n
}

// pendingRun is what the phase needs from the run: the control plane and the installs.
type pendingRun struct {
	env                         *envtest.Environment
	cfg                         *rest.Config
	c                           client.Client
	root, harnessDir, overlay   string
	work                        string
	boundaries                  int
	previousNS, previousSession string // the nothing-pending phase's session, deleted first
}

// pendingResult is the phase's figures.
type pendingResult struct {
	pluginEdge, sdkEdge []ackTiming     // at each agent's edge (edgeProxy): report request -> answer on its watch
	plugin, sdk         []*ackTiming    // the bench's watch: report event -> answer event
	sdkCall             []time.Duration // the SDK's Boundary call, as test/bench times it
}

// The phase's namespace and its two sessions.
const pendingNS, pluginSession, sdkSession = "bench-pending", "dsh", "sdk"

// pendingPhase is the phase's state: what it started (closers, run last first), the watch, the
// agents and the timings so far.
type pendingPhase struct {
	ctx                  context.Context
	p                    pendingRun
	closers              []func()
	aw                   *ackWatch
	kubeconfig, storeURL string // the admin's (the manager's), and the log of all three
	sids                 map[string]string
	active               map[string]bool // each session's committed state
	res                  pendingResult

	pluginEdge, sdkEdge *edgeProxy
	model               *chatmodel.Model // the plugin's
	await               func(op string) error
	sdk                 *agentsdk.Client
	turn                int64 // the SDK's open turn
}

// measurePending runs the phase with a selection pending and prints its figures (p.boundaries
// 0 skips it).
func measurePending(ctx context.Context, p pendingRun) error {
	if p.boundaries == 0 {
		return nil
	}
	res, err := runPending(ctx, p)
	if err != nil {
		return fmt.Errorf("the phase with a selection pending: %w", err)
	}
	reportPending(p.boundaries, res)
	return nil
}

// runPending builds and starts the manager, the two agents and the watch, runs the K
// boundaries alternating the agents, and returns the timings.
func runPending(ctx context.Context, p pendingRun) (*pendingResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logf.SetLogger(logr.Discard()) // the SDK's client logs through controller-runtime's logger
	ph := &pendingPhase{ctx: ctx, p: p, active: map[string]bool{}}
	defer ph.close()
	if err := ph.startManager(); err != nil {
		return nil, err
	}
	if err := ph.startAgents(); err != nil {
		return nil, err
	}
	k := p.boundaries
	fmt.Fprintf(os.Stderr, "dshbench: %d boundaries with a selection pending, alternating the dsh plugin and the Go SDK\n", k)
	for i := 1; i <= k; i++ {
		order := []func(int) error{ph.pluginBoundary, ph.sdkBoundary}
		if i%2 == 0 {
			slices.Reverse(order)
		}
		for _, f := range order {
			if err := f(i); err != nil {
				return nil, fmt.Errorf("boundary %d: %w", i, err)
			}
		}
	}
	if err := ph.await("idle"); err != nil {
		return nil, fmt.Errorf("the plugin's turn did not end: %w", err)
	}
	if err := ph.sdk.EndTurn(ctx, ph.turn, harness.TurnCompleted); err != nil {
		return nil, err
	}
	ph.res.pluginEdge, ph.res.sdkEdge = ph.pluginEdge.timings(), ph.sdkEdge.timings()
	return &ph.res, nil
}

func (ph *pendingPhase) close() {
	for i := len(ph.closers) - 1; i >= 0; i-- {
		ph.closers[i]()
	}
}

// startManager builds the manager binary, creates the phase's namespace and sessions, starts
// the watch and the manager, and waits until the manager has taken both sessions on.
func (ph *pendingPhase) startManager() error {
	ctx, p := ph.ctx, ph.p
	// The nothing-pending phase's session has no agent any more; the manager need not take it on.
	_ = p.c.Delete(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: p.previousNS, Name: p.previousSession}})

	fmt.Fprintln(os.Stderr, "dshbench: building the manager (go build ./cmd/manager)")
	binDir := filepath.Join(p.work, "bin")
	build := exec.Command("go", "build", "-o", binDir+"/", "./cmd/manager")
	build.Dir = p.root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/manager: %w\n%s", err, out)
	}
	admin, err := p.env.AddUser(envtest.User{Name: "dshbench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	ph.kubeconfig = filepath.Join(p.work, "admin.kubeconfig")
	if err := os.WriteFile(ph.kubeconfig, kc, 0o600); err != nil {
		return err
	}
	dbDir := filepath.Join(p.work, "pending-store")
	if err := os.MkdirAll(dbDir, 0o755); err != nil {
		return err
	}
	ph.storeURL = "sqlite://" + filepath.Join(dbDir, "log.db")
	if err := ph.createSessions(); err != nil {
		return err
	}
	if ph.aw, err = startAckWatch(ctx, p.cfg, pendingNS); err != nil {
		return err
	}

	fmt.Fprintln(os.Stderr, "dshbench: starting the manager (--webhook-port=-1, events on, the agents' SQLite log)")
	logPath := filepath.Join(p.work, "manager.log")
	stop, err := startManager(filepath.Join(binDir, "manager"), ph.kubeconfig, ph.storeURL, logPath)
	if err != nil {
		return err
	}
	ph.closers = append(ph.closers, stop)
	for _, name := range []string{pluginSession, sdkSession} {
		if err := ph.aw.waitFor(name, time.Minute, "taken on by the manager", func(s *agentsv1alpha1.AgentSession, _ []*ackTiming) bool {
			return s.Status.PlanMode.Config != nil && s.Status.ObservedGeneration == s.Generation
		}); err != nil {
			return fmt.Errorf("%w\nmanager log:\n%s", err, tailOf(logPath))
		}
		s, _ := ph.aw.snapshot(name)
		ph.active[name] = s.Status.PlanMode.Active
	}
	return nil
}

// createSessions creates the phase's namespace, its default PlanModeConfig and both sessions.
func (ph *pendingPhase) createSessions() error {
	ctx, c := ph.ctx, ph.p.c
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pendingNS}}); err != nil {
		return err
	}
	if err := c.Create(ctx, &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: pendingNS, Name: agentsv1alpha1.DefaultPlanModeConfigName},
		Spec: agentsv1alpha1.PlanModeConfigSpec{Section: "You are in plan mode (bench)."}}); err != nil {
		return err
	}
	stamp := time.Now().UnixNano()
	ph.sids = map[string]string{pluginSession: fmt.Sprintf("bench-dsh-%d", stamp), sdkSession: fmt.Sprintf("bench-sdk-%d", stamp)}
	for _, name := range []string{pluginSession, sdkSession} {
		if err := c.Create(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: pendingNS, Name: name},
			Spec: agentsv1alpha1.AgentSessionSpec{SessionID: ph.sids[name]}}); err != nil {
			return err
		}
	}
	return nil
}

// startAgents starts each agent behind its own edge proxy (its only way to the API server) and
// opens a turn on each: the plugin's on a message (its first model request arrives and is
// held), the SDK's with its first step.
func (ph *pendingPhase) startAgents() error {
	ctx, p := ph.ctx, ph.p
	var err error
	if ph.pluginEdge, err = newEdgeProxy(p.cfg); err != nil {
		return err
	}
	ph.closers = append(ph.closers, ph.pluginEdge.Close)
	if ph.sdkEdge, err = newEdgeProxy(p.cfg); err != nil {
		return err
	}
	ph.closers = append(ph.closers, ph.sdkEdge.Close)

	store, err := sessionlog.Open(ctx, ph.storeURL)
	if err != nil {
		return err
	}
	ph.closers = append(ph.closers, func() { _ = store.Close() })
	sdkCfg := &rest.Config{Host: ph.sdkEdge.srv.URL, QPS: -1} // as test/bench: no client-side rate limit
	if ph.sdk, err = agentsdk.New(ctx, agentsdk.Options{Config: sdkCfg, Namespace: pendingNS, Name: sdkSession, Store: store}); err != nil {
		return err
	}
	ph.closers = append(ph.closers, ph.sdk.Close)

	// The plugin's model holds each of the turn's first k requests: the toggle is made while
	// request i is held (its step's boundary is behind it), so the next step's boundary,
	// after the release, finds the selection pending.
	ph.model = chatmodel.New()
	ph.closers = append(ph.closers, ph.model.Close)
	for i := range p.boundaries {
		ph.model.Script(i, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"file_path":"README.md"}`}}})
	}
	ph.model.Fallback(func(int, chatmodel.Seen) chatmodel.Reply { return chatmodel.Reply{Text: "done."} })
	kubeconfig := filepath.Join(p.work, "plugin-edge.kubeconfig")
	if err := proxyKubeconfig(kubeconfig, ph.pluginEdge.srv.URL); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "dshbench: starting the harness with the dsh plugin for the pending phase")
	cmd, await, err := launchPlugin(pluginRun{harnessDir: p.harnessDir, overlay: p.overlay, work: p.work, modelURL: ph.model.URL(), kubeconfig: kubeconfig,
		storeURL: ph.storeURL, ns: pendingNS, name: pluginSession, sid: ph.sids[pluginSession],
		env: []string{fmt.Sprintf("PLANMODE_BOUNDARY_WAIT_MS=%d", pendingWait.Milliseconds())}}, "plugin-pending")
	if err != nil {
		return err
	}
	ph.closers = append(ph.closers, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ph.await = await

	if err := sendMessage(ctx, p.c, pendingNS, pluginSession, "pending-1", "toggle away"); err != nil {
		return err
	}
	if err := arrived(ph.model, 0); err != nil {
		return err
	}
	if ph.turn, err = ph.sdk.StartTurn(ctx); err != nil {
		return err
	}
	_, err = sdkStep(ctx, ph.sdk, ph.turn, 1, false)
	return err
}

// toggle flips the session's selection and waits until the bench's watch shows it waiting for
// the agent's next boundary.
func (ph *pendingPhase) toggle(name string) (bool, error) {
	want := !ph.active[name]
	obj := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: pendingNS, Name: name}}
	if err := ph.p.c.Patch(ph.ctx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"planMode":{"active":%t}}}`, want))); err != nil {
		return want, err
	}
	return want, ph.aw.waitFor(name, pendingWait, "the selection pending", func(s *agentsv1alpha1.AgentSession, _ []*ackTiming) bool {
		return framework.SelectionWaits(s, want)
	})
}

// answered waits for the bench's watch to show the i-th answer of the session, Admitted with
// want, and for the agent's edge proxy to have passed it on.
func (ph *pendingPhase) answered(name string, edge *edgeProxy, i int, want bool) (*ackTiming, error) {
	if err := ph.aw.waitFor(name, pendingWait, fmt.Sprintf("answer %d", i), func(_ *agentsv1alpha1.AgentSession, rs []*ackTiming) bool {
		return answeredCount(rs) >= i
	}); err != nil {
		return nil, err
	}
	_, rs := ph.aw.snapshot(name)
	if len(rs) != i {
		return nil, fmt.Errorf("session %s: %d boundary reports after %d toggles, want one each", name, len(rs), i)
	}
	r := rs[i-1]
	if r.result != agentsv1alpha1.BoundaryAdmitted || r.active != want {
		return nil, fmt.Errorf("session %s: boundary %d/%d answered %s active=%v, want Admitted active=%v", name, r.turn, r.step, r.result, r.active, want)
	}
	ph.active[name] = want
	for deadline := time.Now().Add(pendingWait); ; time.Sleep(5 * time.Millisecond) {
		ts := edge.timings()
		if len(ts) > i {
			return nil, fmt.Errorf("session %s: the agent sent %d boundary reports after %d toggles", name, len(ts), i)
		}
		if len(ts) == i && !ts[i-1].answered.IsZero() {
			return r, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("session %s: the answer to boundary %d did not reach the agent's watch in %s", name, i, pendingWait)
		}
	}
}

// pluginBoundary is the plugin's i-th boundary with a selection pending.
func (ph *pendingPhase) pluginBoundary(i int) error {
	want, err := ph.toggle(pluginSession)
	if err != nil {
		return err
	}
	// The bench's watch has seen it pending; give the plugin's own watch a moment too
	// (outside the measured interval), then let the step end: the next boundary asks.
	time.Sleep(50 * time.Millisecond)
	ph.model.Release(i - 1)
	if i < ph.p.boundaries {
		if err := arrived(ph.model, i); err != nil {
			return err
		}
	}
	r, err := ph.answered(pluginSession, ph.pluginEdge, i, want)
	if err != nil {
		return err
	}
	ph.res.plugin = append(ph.res.plugin, r)
	return nil
}

// sdkBoundary is the SDK agent's i-th boundary with a selection pending: the toggle after its
// step i, timed at step i+1.
func (ph *pendingPhase) sdkBoundary(i int) error {
	want, err := ph.toggle(sdkSession)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ph.ctx, pendingWait)
	err = ph.sdk.WaitFor(wctx, func(s *agentsv1alpha1.AgentSession) bool { return framework.SelectionWaits(s, want) })
	cancel()
	if err != nil {
		return err
	}
	d, err := sdkStep(ph.ctx, ph.sdk, ph.turn, int64(i+1), true)
	if err != nil {
		return err
	}
	r, err := ph.answered(sdkSession, ph.sdkEdge, i, want)
	if err != nil {
		return err
	}
	ph.res.sdk = append(ph.res.sdk, r)
	ph.res.sdkCall = append(ph.res.sdkCall, d)
	return nil
}

// sdkStep runs one step through the SDK as test/bench's step does; with asked, the boundary
// must ask the manager and be answered, and its duration is returned.
func sdkStep(ctx context.Context, c *agentsdk.Client, turn, step int64, asked bool) (time.Duration, error) {
	start := time.Now()
	res, err := c.Boundary(ctx, turn, step, pendingWait)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if asked && (!res.Asked || res.Unanswered) {
		return 0, fmt.Errorf("SDK turn %d step %d: the boundary was not answered by the manager (asked %v, unanswered %v)", turn, step, res.Asked, res.Unanswered)
	}
	var msgs []harness.Event
	if step == 1 {
		msgs = append(msgs, agentsdk.UserText("task"))
	}
	hdr := refagent.Header(res, harness.LLMCallConfig{Provider: "reference", Model: "bench"}, refagent.DefaultSystem)
	if err := c.StartStep(ctx, res, agentsdk.StepInput{Messages: msgs, Header: &hdr}); err != nil {
		return 0, err
	}
	return d, c.EndStep(ctx, turn, step)
}

func arrived(m *chatmodel.Model, n int) error {
	select {
	case <-m.Arrived(n):
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("the plugin's model request %d did not arrive in 2 minutes", n)
	}
}

// sendMessage appends a user message to the session's steer queue.
func sendMessage(ctx context.Context, c client.Client, ns, name, id, text string) error {
	var s agentsv1alpha1.AgentSession
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		return err
	}
	s.Spec.SteerQueue = append(s.Spec.SteerQueue, agentsv1alpha1.SteerMessage{ID: id, Text: text})
	return c.Update(ctx, &s)
}

// startManager runs the manager binary as test/e2e does (webhooks off, events on, metrics off)
// against the admin kubeconfig and the agents' store, waits for its /readyz, and returns what
// stops it.
func startManager(bin, kubeconfig, storeURL, logPath string) (func(), error) {
	hp, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--metrics-bind-address=0", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", hp),
		"--webhook-port=-1", "--events=on", "--graceful-shutdown-timeout=2s")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PLANMODE_LOG_STORE="+storeURL)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(exited) }()
	stop := func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-exited:
			return nil, fmt.Errorf("the manager exited:\n%s", tailOf(logPath))
		default:
		}
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", hp)); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the manager was not ready in a minute:\n%s", tailOf(logPath))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tailOf is the last 4 KiB of a file, for error messages.
func tailOf(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// percentile is test/bench's: the value at rank p*(n-1), rounded.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}

func latencies(rs []*ackTiming) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.latency()
	}
	return out
}

// reportPending prints the phase's figures, then the same as one JSON line.
func reportPending(k int, r *pendingResult) {
	msf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	each := func(ds []time.Duration) []float64 {
		out := make([]float64, len(ds))
		for i, d := range ds {
			out[i] = msf(d)
		}
		return out
	}
	type fig struct{ median, p99 time.Duration }
	figOf := func(ds []time.Duration) fig { return fig{percentile(ds, 0.5), percentile(ds, 0.99)} }
	edgeLat := func(ts []ackTiming) []time.Duration {
		out := make([]time.Duration, len(ts))
		for i := range ts {
			out[i] = ts[i].latency()
		}
		return out
	}
	pe, se := edgeLat(r.pluginEdge), edgeLat(r.sdkEdge)
	pw, sw := latencies(r.plugin), latencies(r.sdk)
	pE, sE, pW, sW, sC := figOf(pe), figOf(se), figOf(pw), figOf(sw), figOf(r.sdkCall)
	pair := func(label string, p, s fig, np, ns int) {
		fmt.Printf("  %s\n", label)
		fmt.Printf("    dsh plugin         median %7.2f ms   p99 %7.2f ms   (%d samples)\n", msf(p.median), msf(p.p99), np)
		fmt.Printf("    Go SDK             median %7.2f ms   p99 %7.2f ms   (%d samples)\n", msf(s.median), msf(s.p99), ns)
		fmt.Printf("    ratio plugin/SDK   median %.3fx   p99 %.3fx\n", msf(p.median)/msf(s.median), msf(p.p99)/msf(s.p99))
	}
	fmt.Printf("with a selection pending: %d boundaries each, alternating the dsh plugin and the Go SDK (pkg/agentsdk, stepped as test/bench does),\n", k)
	fmt.Println("  both answered by the real manager binary (go build ./cmd/manager; --webhook-port=-1, events on) on one SQLite log")
	fmt.Println("  each boundary: the user's toggle during a turn, marked pending by the manager, applied at the agent's next step boundary")
	pair("ack latency, at the agent's edge (the figure): from the arrival of the agent's report request (its status.agent.boundary patch)\n"+
		"  at a loopback proxy in front of the agent to the proxy passing the agent the event of its own watch whose\n"+
		"  status.planMode.lastBoundary answers that (turn, step, seq); one such proxy per agent", pE, sE, len(pe), len(se))
	pair("ack latency, API side: from the event in which status.agent.boundary names the step to the one in which\n"+
		"  status.planMode.lastBoundary answers it, both received by one watch in the bench", pW, sW, len(pw), len(sw))
	fmt.Printf("  Go SDK, its Boundary call as test/bench times it (in process: tail read, report, answer through the SDK's cache): median %.2f ms   p99 %.2f ms\n", msf(sC.median), msf(sC.p99))
	if k <= 50 {
		fmt.Println("  (p99 as test/bench takes it, the value at rank 0.99*(n-1) rounded: with 50 samples or fewer, the largest)")
	}
	out, _ := json.Marshal(map[string]any{"pendingBoundaries": k,
		"pluginAckMedianMs": msf(pE.median), "pluginAckP99Ms": msf(pE.p99), "sdkAckMedianMs": msf(sE.median), "sdkAckP99Ms": msf(sE.p99),
		"ratioMedian": msf(pE.median) / msf(sE.median), "ratioP99": msf(pE.p99) / msf(sE.p99),
		"pluginAckMs": each(pe), "sdkAckMs": each(se),
		"apiSide": map[string]any{"pluginMedianMs": msf(pW.median), "pluginP99Ms": msf(pW.p99), "sdkMedianMs": msf(sW.median), "sdkP99Ms": msf(sW.p99),
			"ratioMedian": msf(pW.median) / msf(sW.median), "pluginMs": each(pw), "sdkMs": each(sw)},
		"sdkBoundaryCallMedianMs": msf(sC.median), "sdkBoundaryCallP99Ms": msf(sC.p99), "sdkBoundaryCallMs": each(r.sdkCall),
		"definition": "agent edge: from the report request's arrival at the agent's proxy to the proxy passing the agent the watch event with the matching status.planMode.lastBoundary"})
	fmt.Println(string(out))
}
