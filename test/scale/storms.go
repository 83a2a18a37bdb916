package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/eventsink"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/apiretry"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/apicount"
)

// stormResult is one side's figures from one storm run.
type stormResult struct {
	takeOn  time.Duration // process start -> every session taken on
	ackLat  []time.Duration
	ackWall time.Duration // boundary storm: release -> last ack
	// kube-apiserver CPU time over each storm, until the API counters stand still afterwards.
	apiCPUBoundary, apiCPUToggle time.Duration
	toggleConv                   time.Duration // toggle storm: first toggle -> every status committed
	// Events the side's processes wrote from each storm's start until its last ack or commit:
	// the ones that went out among the storm's status writes.
	eventsInBoundary, eventsInToggle float64
	// What the side's controllers did over each storm, until its last ack or commit.
	workBoundary, workToggle stormWork
	inTurn                   writes
	idleToggle               writes
	idleStep                 writes
	n, idleSteps             int
	fpIdle                   footprint
	fpBoundary               footprint
	fpToggle                 footprint
	objBytes                 float64 // a session as the API server serves it once the boundary storm is answered
	// The agents' cost in this process, per agent: heap and stacks in use after a GC, and
	// goroutines, from before the first starts until every session is taken on.
	agentBytes, agentGoroutines float64
	// With shards > 1: per shard (process) k, the figures of its sessions and its process.
	shardOf  []int           // agent -> shard
	doneAt   []time.Duration // agent -> toggle storm: when its status showed the commit
	shardFP  [][4]footprint  // shard -> idle, boundary storm, toggle storm, settled after the storms
	shardCnt int
	// benchAfter is this process's memory once the side's agents are closed (shards phase).
	benchAfter memStat
}

// writes of a phase: the manager's (AgentSession status and anything else but Events), its
// Events (core and events.k8s.io: the API server counts both as resource "events"), and the
// agents'. The user's toggles are not charged.
type writes struct {
	status, other, events, agent, conflicts float64
	// statusSec, statusN: the API server's time serving the agentsessions/status writes of
	// the phase (the agents' and the controller's), from its request-duration histogram.
	statusSec, statusN float64
	// terminated: watchers the API server closed in the phase because they fell behind.
	terminated float64
	// refused: writes of the phase the API server refused with 429 (not in the counts above).
	refused float64
	// watches: watches of AgentSessions and PlanModeConfigs started in the phase, nearly all
	// the agents' (two each, again whenever a watch times out or is closed).
	watches float64
	// unsent: the agents' and the user's writes of the phase that failed before they were
	// sent (apicount.Unsent): in neither side's counts, as the API server never saw them.
	unsent float64
}

// total is every write, Events included.
func (w writes) total() float64 { return w.status + w.other + w.events + w.agent }

// butEvents is every write but the Events: what the write targets bound.
func (w writes) butEvents() float64 { return w.total() - w.events }

// statusServeTime is the API server's mean time per status write, in nanoseconds.
func (w writes) statusServeTime() float64 {
	if w.statusN == 0 {
		return 0
	}
	return w.statusSec / w.statusN * 1e9
}

type wsnap struct {
	api         map[string]float64
	agent, user int64
	// agentUnsent, userUnsent: writes that failed before they were sent (apicount.Unsent),
	// so neither the counts above nor the API server's hold them.
	agentUnsent, userUnsent int64
}

func (b *bench) snapWrites(ctx context.Context, agents *apicount.Counter) (wsnap, error) {
	api, err := apiWrites(ctx, b.cfg)
	if err != nil {
		return wsnap{}, err
	}
	return wsnap{api: api, agent: agents.Writes(), user: b.userCount.Writes(),
		agentUnsent: agents.Unsent(), userUnsent: b.userCount.Unsent()}, nil
}

// since charges the writes after s: agentsessions/status writes not made by an agent are the
// manager's; agentsessions writes not made by the user are the manager's too.
func (b *bench) since(ctx context.Context, s wsnap, agents *apicount.Counter) (writes, error) {
	now, err := b.snapWrites(ctx, agents)
	if err != nil {
		return writes{}, err
	}
	d := func(k string) float64 { return now.api[k] - s.api[k] }
	agent := float64(now.agent - s.agent)
	user := float64(now.user - s.user)
	w := writes{agent: agent, events: d("events")}
	w.status = d("agentsessions/status") - agent
	w.other = d("agentsessions") - user
	w.conflicts = d("agentsessions/status 409") + d("agentsessions 409")
	w.statusSec, w.statusN = d("sec agentsessions/status"), d("n agentsessions/status")
	w.terminated = d("terminated watchers")
	w.refused = d("agentsessions/status 429") + d("agentsessions 429") + d("events 429")
	w.watches = d("req WATCH agentsessions") + d("req WATCH planmodeconfigs")
	w.unsent = float64(now.agentUnsent - s.agentUnsent + now.userUnsent - s.userUnsent)
	return w, nil
}

// mixSnapshot is the counters printRequestMix starts from; without -request-mix it scrapes
// nothing, so the storm's release is not preceded by a /metrics read.
func (b *bench) mixSnapshot(ctx context.Context, agents *apicount.Counter) (wsnap, error) {
	if !b.o.requestMix {
		return wsnap{}, nil
	}
	return b.snapWrites(ctx, agents)
}

// printRequestMix prints (with -request-mix) every request the API server served since s, by
// verb and resource, reads included, with the agents' own requests counted client-side.
func (b *bench) printRequestMix(ctx context.Context, what string, s wsnap, agents *apicount.Counter) error {
	if !b.o.requestMix {
		return nil
	}
	now, err := b.snapWrites(ctx, agents)
	if err != nil {
		return err
	}
	var keys []string
	for k := range now.api {
		if strings.HasPrefix(k, "req ") && now.api[k] > s.api[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	fmt.Fprintf(os.Stderr, "request mix, %s (the agents' writes: %d):\n", what, now.agent-s.agent)
	for _, k := range keys {
		fmt.Fprintf(os.Stderr, "  %8.0f  %s\n", now.api[k]-s.api[k], strings.TrimPrefix(k, "req "))
	}
	return nil
}

// quiesce waits until the API server's write counters stand still for 600ms (at most 15s), so
// trailing writes are charged to the phase that caused them.
func (b *bench) quiesce(ctx context.Context) {
	total := func() float64 {
		m, err := apiWrites(ctx, b.cfg)
		if err != nil {
			return -1
		}
		var t float64
		for k, v := range m {
			// Request counts only: they are whole numbers, so the sum does not depend on the map's
			// order. (The duration sums are not: summed in random order they differed between two
			// scrapes with no request in between, and quiesce ran to its 15 s limit.) Not the API
			// server's own identity lease, nor the reads (our own scrapes are some).
			if k != "leases" && k != "terminated watchers" && !strings.HasPrefix(k, "req ") &&
				!strings.HasPrefix(k, "sec ") && !strings.HasPrefix(k, "n ") {
				t += v
			}
		}
		return t
	}
	deadline := time.Now().Add(15 * time.Second)
	last, since := total(), time.Now()
	for time.Now().Before(deadline) && time.Since(since) < 600*time.Millisecond {
		time.Sleep(150 * time.Millisecond)
		if t := total(); t != last {
			last, since = t, time.Now()
		}
	}
}

type agent struct {
	name, id string
	c        *agentsdk.Client
	active   bool
	turn     int64
}

// storeURL gives each (side, run) a fresh log.
func (b *bench) storeURL(ctx context.Context, backend string) (string, error) {
	b.seq++
	switch backend {
	case storeSQLite:
		return "sqlite://" + filepath.Join(b.o.tmp, fmt.Sprintf("log-%d.db", b.seq)), nil
	case storePostgres:
		if b.pg == nil {
			return "", errors.New("no PostgreSQL server")
		}
		return b.pg.CreateDatabase(ctx, fmt.Sprintf("scale_%d", b.seq))
	}
	return "", fmt.Errorf("-stores: unknown backend %q (sqlite or postgres)", backend)
}

// createSessions makes a namespace with the default PlanModeConfig and n AgentSessions.
func (b *bench) createSessions(ctx context.Context, prefix string, n int, labels func(i int) map[string]string) (string, []*agent, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := b.user.Create(ctx, ns); err != nil {
		return "", nil, err
	}
	if err := b.user.Create(ctx, &v1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: v1alpha1.DefaultPlanModeConfigName},
		Spec:       v1alpha1.PlanModeConfigSpec{Section: "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."},
	}); err != nil {
		return "", nil, err
	}
	agents := make([]*agent, n)
	err := parallel(n, 32, func(i int) error {
		a := &agent{name: fmt.Sprintf("s-%05d", i), id: ns.Name + "-" + strconv.Itoa(i)}
		agents[i] = a
		var l map[string]string
		if labels != nil {
			l = labels(i)
		}
		return b.user.Create(ctx, &v1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: a.name, Labels: l},
			Spec:       v1alpha1.AgentSessionSpec{SessionID: a.id},
		})
	})
	return ns.Name, agents, err
}

// deleteSessions removes every AgentSession of ns (envtest runs no namespace controller) and
// waits until they are gone, so the next process starts on an empty cluster.
func (b *bench) deleteSessions(ctx context.Context, ns string, timeout time.Duration) error {
	if err := b.user.DeleteAllOf(ctx, &v1alpha1.AgentSession{}, client.InNamespace(ns)); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		var l v1alpha1.AgentSessionList
		if err := b.user.List(ctx, &l, client.InNamespace(ns), client.Limit(1)); err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("AgentSessions of %s not deleted after %s", ns, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func taken(side string) func(*v1alpha1.AgentSession) bool {
	if side == sideFloor {
		// It observes every generation (floormgr --observe-generation), a new session's first
		// one included.
		return func(s *v1alpha1.AgentSession) bool { return s.Status.ObservedGeneration == s.Generation }
	}
	return func(s *v1alpha1.AgentSession) bool {
		return s.Status.PlanMode.Config != nil && s.Status.ObservedGeneration == s.Generation
	}
}

// committed: the toggle to want is applied as far as the side goes (the floor copies the
// selection; the manager commits it to the log and the status).
func committed(side string, want bool) func(*v1alpha1.AgentSession) bool {
	if side == sideFloor {
		return func(s *v1alpha1.AgentSession) bool {
			sel := s.Status.PlanMode.Selection
			return sel != nil && *sel == want
		}
	}
	return func(s *v1alpha1.AgentSession) bool {
		sel := s.Status.PlanMode.Selection
		return sel != nil && *sel == want && s.Status.PlanMode.Active == want && !s.Status.PlanMode.Pending
	}
}

var model = harness.LLMCallConfig{Provider: "reference", Model: "bench-scale"}

// step runs one step as the reference agent does (as test/bench). With lat set the boundary
// must ask the manager and its duration is stored.
func (sr *stormRun) step(ctx context.Context, a *agent, step int64, lat *time.Duration) error {
	start := time.Now()
	res, err := a.c.Boundary(ctx, a.turn, step, sr.timeout)
	d := time.Since(start)
	if err != nil {
		return fmt.Errorf("%s: boundary turn %d step %d: %w", a.name, a.turn, step, err)
	}
	if lat != nil {
		if !res.Asked {
			return fmt.Errorf("%s turn %d step %d: the boundary did not ask although a selection was pending", a.name, a.turn, step)
		}
		*lat = d
	} else if res.Asked {
		return fmt.Errorf("%s turn %d step %d: an idle boundary asked the manager", a.name, a.turn, step)
	}
	var msgs []harness.Event
	if step == 1 {
		msgs = append(msgs, agentsdk.UserText("task"))
	}
	hdr := refagent.Header(res, model, refagent.DefaultSystem)
	if err := a.c.StartStep(ctx, res, agentsdk.StepInput{Messages: msgs, Header: &hdr}); err != nil {
		return err
	}
	return a.c.EndStep(ctx, a.turn, step)
}

func (sr *stormRun) toggle(ctx context.Context, a *agent, want bool) error {
	obj := &v1alpha1.AgentSession{}
	obj.Namespace, obj.Name = sr.ns, a.name
	body := fmt.Sprintf(`{"spec":{"planMode":{"active":%t}}}`, want)
	// With 10,000 sessions toggled at once, many patches wait past the API server's 60 s
	// request timeout (504) or their connection's TLS handshake times out. A merge patch of one
	// value can be sent again, as a user's script would, until the benchmark's timeout.
	ctx, cancel := context.WithTimeout(ctx, sr.timeout)
	defer cancel()
	return apiretry.Until(ctx, 100*time.Millisecond, 5*time.Second, func() error {
		return sr.b.user.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(body)))
	}, nil)
}

// heapInUse is this process's heap and stack memory in use after a GC, and its goroutines.
func heapInUse() (uint64, int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse, runtime.NumGoroutine()
}

// parallel runs f(0..n-1) with at most limit at once (limit <= 0: all at once).
func parallel(n, limit int, f func(i int) error) error {
	if limit <= 0 || limit > n {
		limit = n
	}
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs = make([]error, n)
	)
	for range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				errs[i] = f(i)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ShardLabel is the label of the documented sharding scheme (cmd/manager --shard-selector).
const ShardLabel = "planmode.harness.dev/shard"

func shardName(k int) string { return string(rune('a' + k)) }

// stormRun is one side's run of the storms: its log, sessions, processes and agents, and the
// figures measured so far.
type stormRun struct {
	b             *bench
	side, backend string
	n             int
	store         sessionlog.Store
	ns            string
	agents        []*agent
	procs         []*proc // one per shard
	agentCount    *apicount.Counter
	r             *stormResult
	timeout       time.Duration // bound of each wait: -timeout, or more for a large storm (opts.waitFor)
}

// storms runs the boundary storm and the toggle storm with n sessions against one side; with
// shards > 1, session i is labelled shard i%shards and one process per shard runs with
// --shard-selector for its label.
func (b *bench) storms(ctx context.Context, side, backend string, n, shards int) (*stormResult, error) {
	url, err := b.storeURL(ctx, backend)
	if err != nil {
		return nil, err
	}
	// The agents' log store: one for all of them, where each agent pod has its own. Its calls
	// queue for the pool's connections behind every other agent's, so they are bounded by the
	// storm's wait rather than the store's 15 s hang detector (20,000 agents' step/end appends
	// at once outlast it on two cores). For the same reason its write transactions may sit idle
	// that long too: one of thousands of agent goroutines here can wait past the product's
	// frozen-writer limit for a core between its transaction's two round trips.
	store, err := sessionlog.Open(ctx, url, sessionlog.CallTimeout(b.o.waitFor(n)), sessionlog.WriteIdleLimit(b.o.waitFor(n)))
	if err != nil {
		return nil, err
	}
	defer store.Close()
	sr := &stormRun{b: b, side: side, backend: backend, n: n, store: store, agentCount: apicount.New(), timeout: b.o.waitFor(n),
		r: &stormResult{n: n, shardCnt: shards, shardOf: make([]int, n), doneAt: make([]time.Duration, n), shardFP: make([][4]footprint, shards)}}
	var labels func(int) map[string]string
	if shards > 1 {
		labels = func(i int) map[string]string { return map[string]string{ShardLabel: shardName(i % shards)} }
		for i := range sr.r.shardOf {
			sr.r.shardOf[i] = i % shards
		}
	}
	if sr.ns, sr.agents, err = b.createSessions(ctx, "storm-"+side, n, labels); err != nil {
		return nil, err
	}
	defer func() { _ = b.deleteSessions(context.WithoutCancel(ctx), sr.ns, sr.timeout) }()
	sr.procs = make([]*proc, shards)
	for k := range sr.procs {
		po := procOpts{side: side, store: url}
		if shards > 1 {
			po.shard = ShardLabel + "=" + shardName(k)
		}
		pk, err := b.startProc(ctx, po)
		if err != nil {
			return nil, err
		}
		defer pk.stop()
		sr.procs[k] = pk
	}
	logPhase("  %s: %d sessions created, %d process(es) ready", side, n, shards)
	defer func() {
		// Every agent's watches stop here, before the processes stop and the sessions go, so
		// that none of them re-lists and nothing of this side is left running into the next.
		_ = parallel(len(sr.agents), 64, func(i int) error {
			if c := sr.agents[i].c; c != nil {
				c.Close()
				sr.agents[i].c = nil
			}
			return nil
		})
	}()
	if err := sr.startAgents(ctx); err != nil {
		return nil, err
	}
	if err := sr.idleSteps(ctx); err != nil {
		return nil, err
	}
	cpuProfile := sr.profileManagerCPU()
	if err := sr.boundaryStorm(ctx); err != nil {
		return nil, err
	}
	if err := sr.toggleStorm(ctx); err != nil {
		return nil, err
	}
	if err := <-cpuProfile; err != nil {
		return nil, err
	}
	if err := sr.stepsAfterToggles(ctx); err != nil {
		return nil, err
	}
	if shards > 1 {
		sr.settle()
	}
	return sr.r, nil
}

// procCounters is the side's processes' own counters, summed over them: read from the
// processes, not the API server, so that reading them at a storm's release adds nothing to the
// API server's work.
type procCounters struct {
	events                   float64 // Events written (the floor writes none)
	reconciles, reconcileSec float64 // reconciles finished, and their time
	queued, queuedSec        float64 // sessions taken from the work queue, and their wait
	appends, appendSec       float64 // session-log appends (the manager's), and their time
	storms                   float64 // storms the manager's storm rule entered
}

func (sr *stormRun) counters(ctx context.Context) (procCounters, error) {
	var c procCounters
	for _, p := range sr.procs {
		m, err := p.scrape(ctx)
		if err != nil {
			return c, err
		}
		c.events += m["planmode_events_written_total"]
		c.reconciles += sumMetric(m, "controller_runtime_reconcile_time_seconds_count")
		c.reconcileSec += sumMetric(m, "controller_runtime_reconcile_time_seconds_sum")
		c.queued += sumMetric(m, "workqueue_queue_duration_seconds_count")
		c.queuedSec += sumMetric(m, "workqueue_queue_duration_seconds_sum")
		c.appends += sumMetric(m, "planmode_log_store_operation_seconds_count", `operation="append"`)
		c.appendSec += sumMetric(m, "planmode_log_store_operation_seconds_sum", `operation="append"`)
		c.storms += m["planmode_storms_total"]
	}
	return c, nil
}

// stormWork is what a side's controllers did over a storm: how many reconciles, how long one
// took and how long a session waited in the work queue for one, on average, and the average
// log append (zero for the floor, which appends nothing); and how many storms the manager's
// storm rule entered (zero when it was already in one as the window opened, more than one
// when it left between two of the API server's waves and could let held Events out). With
// every worker busy, the storm lasts about reconciles x reconcile time / workers.
type stormWork struct {
	reconciles, reconcile, queueWait, appendTime float64 // count, then seconds
	storms                                       float64
}

// since is the Events written since c0 and the storm's work.
func (sr *stormRun) since(ctx context.Context, c0 procCounters) (float64, stormWork, error) {
	c, err := sr.counters(ctx)
	if err != nil {
		return 0, stormWork{}, err
	}
	mean := func(sum, n float64) float64 {
		if n <= 0 {
			return 0
		}
		return sum / n
	}
	w := stormWork{
		reconciles: c.reconciles - c0.reconciles,
		reconcile:  mean(c.reconcileSec-c0.reconcileSec, c.reconciles-c0.reconciles),
		queueWait:  mean(c.queuedSec-c0.queuedSec, c.queued-c0.queued),
		appendTime: mean(c.appendSec-c0.appendSec, c.appends-c0.appends),
		storms:     c.storms - c0.storms,
	}
	return c.events - c0.events, w, nil
}

// quiesce waits until the side's processes have written the Events they hold or queue (the
// manager holds a storm's Events until the storm is over, each for at most a minute), then
// until the API server sees no write for a while: a storm's writes count in its own window,
// not in the next.
func (sr *stormRun) quiesce(ctx context.Context) {
	wait := eventsink.DefaultHoldFor + 30*time.Second // the manager's hold, and time to write
	deadline := time.Now().Add(wait)
	for _, p := range sr.procs {
		for {
			m, err := p.scrape(ctx)
			if err != nil || m["planmode_events_queued"] == 0 { // the floor has none
				break
			}
			if time.Now().After(deadline) {
				// Past the manager's own hold: its Events will count in the next window.
				logPhase("  %s: %s still has %.0f Events queued after %s; they count in the next phase", sr.side, p.name, m["planmode_events_queued"], wait)
				break
			}
			time.Sleep(100 * time.Millisecond) // polls the gauge, the condition waited for
		}
	}
	sr.b.quiesce(ctx)
}

// awaitQuiet waits, before the storm is timed, until kube-apiserver and etcd are quiet, and
// says how long that took.
func (sr *stormRun) awaitQuiet(ctx context.Context, storm string) error {
	wait, err := sr.b.awaitQuietControlPlane(ctx)
	if err != nil {
		return err
	}
	logPhase("  %s: before the %s storm, kube-apiserver and etcd quiet after %s", sr.side, storm, wait.Round(time.Millisecond))
	return nil
}

// settle measures every process once the storms are over and its CPU has settled: RSS then,
// and its peak since start (VmHWM). The processes settle at once, side by side.
func (sr *stormRun) settle() {
	sr.b.quiesce(context.Background())
	var wg sync.WaitGroup
	for k, pk := range sr.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sr.r.shardFP[k][3] = pk.idleFootprint(3 * time.Second)
		}()
	}
	wg.Wait()
}

// sampleAll starts sampling every process's footprint.
func (sr *stormRun) sampleAll() []*sampler {
	s := make([]*sampler, len(sr.procs))
	for k, pk := range sr.procs {
		s[k] = pk.sample()
	}
	return s
}

// stopAll stops the samplers and records each process's footprint as its which-th (0 idle,
// 1 boundary storm, 2 toggle storm); it returns the first process's.
func (sr *stormRun) stopAll(s []*sampler, which int) footprint {
	for k := range s {
		sr.r.shardFP[k][which] = s[k].stop()
	}
	return sr.r.shardFP[0][which]
}

// startAgents starts an agent per session and waits until the side has taken every session
// on; it measures the agents' own cost and then the processes' idle footprint.
func (sr *stormRun) startAgents(ctx context.Context) error {
	b, r, n, agents := sr.b, sr.r, sr.n, sr.agents
	agentCfg := sr.agentCount.Wrap(b.agentCfg)
	agentMem0, agentG0 := heapInUse()
	if err := parallel(n, 64, func(i int) error {
		c, err := agentsdk.New(ctx, agentsdk.Options{Config: agentCfg, Namespace: sr.ns, Name: agents[i].name, Store: sr.store, SyncTimeout: sr.timeout,
			WatchTimeout: b.o.agentWatchTimeout})
		agents[i].c = c
		return err
	}); err != nil {
		return fmt.Errorf("start agents: %w", err)
	}
	if err := parallel(n, 0, func(i int) error {
		wctx, cancel := context.WithTimeout(ctx, sr.timeout)
		defer cancel()
		return agents[i].c.WaitFor(wctx, taken(sr.side))
	}); err != nil {
		return fmt.Errorf("sessions not taken on by %s: %w", sr.side, err)
	}
	r.takeOn = time.Since(sr.procs[0].startedAt)
	agentMem1, agentG1 := heapInUse()
	r.agentBytes = (float64(agentMem1) - float64(agentMem0)) / float64(n)
	r.agentGoroutines = float64(agentG1-agentG0) / float64(n)
	logPhase("  %s: %d agents started, every session taken on", sr.side, n)
	sr.quiesce(ctx)
	for k, pk := range sr.procs {
		r.shardFP[k][0] = pk.idleFootprint(3 * time.Second)
	}
	r.fpIdle = r.shardFP[0][0]
	return nil
}

// idleSteps: steps with nothing pending, no API write by anyone. Each agent's turn stays open
// for the boundary storm.
func (sr *stormRun) idleSteps(ctx context.Context) error {
	b, agents := sr.b, sr.agents
	w0, err := b.snapWrites(ctx, sr.agentCount)
	if err != nil {
		return err
	}
	if err := parallel(sr.n, 0, func(i int) error {
		a := agents[i]
		t, err := a.c.StartTurn(ctx)
		if err != nil {
			return err
		}
		a.turn = t
		return sr.step(ctx, a, 1, nil)
	}); err != nil {
		return fmt.Errorf("idle steps: %w", err)
	}
	sr.quiesce(ctx)
	if sr.r.idleStep, err = b.since(ctx, w0, sr.agentCount); err != nil {
		return err
	}
	sr.r.idleSteps = sr.n
	return nil
}

// profileManagerCPU takes, with -profile-dir, a CPU profile of the manager over the storms;
// the channel reports when it is written.
func (sr *stormRun) profileManagerCPU() <-chan error {
	b := sr.b
	cpuProfile := make(chan error, 1)
	if b.o.profileDir != "" && sr.side == sideManager {
		go func() {
			cpuProfile <- sr.procs[0].profile(b.o.profileDir, "profile?seconds=15", fmt.Sprintf("cpu-storms-%s-%d.pprof", sr.backend, b.seq))
		}()
	} else {
		cpuProfile <- nil
	}
	return cpuProfile
}

// boundaryStorm: every session toggled during its turn; once every agent sees the selection
// pending, all of them reach their next boundary at once. The turns end afterwards.
func (sr *stormRun) boundaryStorm(ctx context.Context) error {
	b, r, agents := sr.b, sr.r, sr.agents
	w0, err := b.snapWrites(ctx, sr.agentCount)
	if err != nil {
		return err
	}
	if err := sr.selectDuringTurns(ctx); err != nil {
		return err
	}
	// Start from the steady state the storm is about: every agent at its boundary with a
	// selection pending and the API server idle. The manager's Events for the selections (one
	// goroutine each) can otherwise still be queued at the API server at release, a load the
	// floor never has, and they would land in the storm's figures.
	sr.quiesce(ctx)
	if err := sr.awaitQuiet(ctx, "boundary"); err != nil {
		return err
	}
	if err := sr.releaseBoundaries(ctx); err != nil {
		return err
	}
	if r.inTurn, err = b.since(ctx, w0, sr.agentCount); err != nil {
		return err
	}
	if r.objBytes, err = b.objectBytes(ctx, sr.ns, agents, 20); err != nil {
		return err
	}
	if err := parallel(sr.n, 0, func(i int) error { return agents[i].c.EndTurn(ctx, agents[i].turn, harness.TurnCompleted) }); err != nil {
		return err
	}
	sr.quiesce(ctx)
	return nil
}

// selectDuringTurns toggles every session during its open turn and waits until every agent
// sees its selection pending.
func (sr *stormRun) selectDuringTurns(ctx context.Context) error {
	agents := sr.agents
	// All n toggles at once, as in the storms: the first burst of n concurrent requests grows
	// this process's shared HTTP/2 connection pool (n watches already fill its connections'
	// streams), and Go's transport then dials and TLS-handshakes many connections at once,
	// keeping a few. Done here, unmeasured, that growth (handshakes the API server pays for)
	// no longer lands in the run's first measured storm.
	if err := parallel(sr.n, 0, func(i int) error { return sr.toggle(ctx, agents[i], !agents[i].active) }); err != nil {
		return err
	}
	if err := parallel(sr.n, 0, func(i int) error {
		a := agents[i]
		want := !a.active
		wctx, cancel := context.WithTimeout(ctx, sr.timeout)
		defer cancel()
		return a.c.WaitFor(wctx, awaitsBoundary(sr.side, want))
	}); err != nil {
		return fmt.Errorf("selections not pending: %w", err)
	}
	return nil
}

// awaitsBoundary: a toggle to want made during a turn waits for the agent's next boundary, as
// far as the agent's watch shows. The floor marks it pending at once (its writes are counted
// with that write made); the manager holds that write for the agent's report
// (--pending-status-delay), and the agent asks because the status has not taken it on.
func awaitsBoundary(side string, want bool) func(*v1alpha1.AgentSession) bool {
	if side == sideFloor {
		return func(s *v1alpha1.AgentSession) bool { return framework.SelectionPending(s, want) }
	}
	return func(s *v1alpha1.AgentSession) bool { return framework.SelectionWaits(s, want) }
}

// releaseBoundaries holds every agent at its boundary, releases them all at once and measures
// the storm until the API server is quiet again: each acknowledgement's latency, the
// processes' footprint and the API server's CPU time.
func (sr *stormRun) releaseBoundaries(ctx context.Context) error {
	b, r, agents := sr.b, sr.r, sr.agents
	r.ackLat = make([]time.Duration, sr.n)
	release := make(chan struct{})
	var ready sync.WaitGroup
	ready.Add(sr.n)
	smp := sr.sampleAll()
	var stormStart time.Time
	errc := make(chan error, 1)
	go func() {
		errc <- parallel(sr.n, 0, func(i int) error {
			ready.Done()
			<-release
			a := agents[i]
			if err := sr.step(ctx, a, 2, &r.ackLat[i]); err != nil {
				return err
			}
			a.active = !a.active
			return nil
		})
	}()
	ready.Wait()
	apiProfile := b.profileAPIServer(ctx, "boundary", sr.side, sr.backend)
	apiCPU0, err := b.apiCPU()
	if err != nil {
		return err
	}
	mix0, err := b.mixSnapshot(ctx, sr.agentCount)
	if err != nil {
		return err
	}
	c0, err := sr.counters(ctx)
	if err != nil {
		return err
	}
	stormStart = time.Now()
	close(release)
	if err := <-errc; err != nil {
		return fmt.Errorf("boundary storm: %w", err)
	}
	r.ackWall = time.Since(stormStart)
	if r.eventsInBoundary, r.workBoundary, err = sr.since(ctx, c0); err != nil {
		return err
	}
	logPhase("  %s: boundary storm done in %s", sr.side, r.ackWall.Round(time.Millisecond))
	if sr.side == sideManager {
		// The manager's heap as the last answer lands, while its Events for the storm are
		// still queued or being sent (with --events=off its storm RSS peaks match the floor's).
		if err := sr.procs[0].profile(b.o.profileDir, "heap", fmt.Sprintf("heap-boundary-%s-%d.pprof", sr.backend, b.seq)); err != nil {
			return fmt.Errorf("profile the manager's heap: %w", err)
		}
	}
	// Nothing else runs until the window closes, so the profile holds the storm and quiet only.
	if err := <-apiProfile; err != nil {
		return fmt.Errorf("profile the API server: %w", err)
	}
	r.fpBoundary = sr.stopAll(smp, 1)
	sr.quiesce(ctx)
	if r.apiCPUBoundary, err = b.apiCPU(); err != nil {
		return err
	}
	r.apiCPUBoundary -= apiCPU0
	return b.printRequestMix(ctx, sr.side+"/"+sr.backend+": boundary storm", mix0, sr.agentCount)
}

// toggleStorm: every idle session toggled at once; done when every status shows it.
func (sr *stormRun) toggleStorm(ctx context.Context) error {
	b, r := sr.b, sr.r
	if err := sr.awaitQuiet(ctx, "toggle"); err != nil {
		return err
	}
	w0, err := b.snapWrites(ctx, sr.agentCount)
	if err != nil {
		return err
	}
	smp := sr.sampleAll()
	apiCPU0, err := b.apiCPU()
	if err != nil {
		return err
	}
	mix0, err := b.mixSnapshot(ctx, sr.agentCount)
	if err != nil {
		return err
	}
	c0, err := sr.counters(ctx)
	if err != nil {
		return err
	}
	apiProfile := b.profileAPIServer(ctx, "toggle", sr.side, sr.backend)
	if err := sr.toggleAll(ctx); err != nil {
		return fmt.Errorf("toggle storm: %w", err)
	}
	if r.eventsInToggle, r.workToggle, err = sr.since(ctx, c0); err != nil {
		return err
	}
	logPhase("  %s: toggle storm done in %s", sr.side, r.toggleConv.Round(time.Millisecond))
	if err := <-apiProfile; err != nil {
		return fmt.Errorf("profile the API server: %w", err)
	}
	r.fpToggle = sr.stopAll(smp, 2)
	sr.quiesce(ctx)
	if r.apiCPUToggle, err = b.apiCPU(); err != nil {
		return err
	}
	r.apiCPUToggle -= apiCPU0
	if err := b.printRequestMix(ctx, sr.side+"/"+sr.backend+": toggle storm", mix0, sr.agentCount); err != nil {
		return err
	}
	r.idleToggle, err = b.since(ctx, w0, sr.agentCount)
	return err
}

// toggleAll toggles every session at once and waits until every status shows the toggle
// committed; it records when each did, and the last of them as the storm's length.
func (sr *stormRun) toggleAll(ctx context.Context) error {
	r, agents := sr.r, sr.agents
	t0 := time.Now()
	var conv atomic.Int64
	if err := parallel(sr.n, 0, func(i int) error {
		a := agents[i]
		want := !a.active
		if err := sr.toggle(ctx, a, want); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, sr.timeout)
		defer cancel()
		if err := a.c.WaitFor(wctx, committed(sr.side, want)); err != nil {
			return fmt.Errorf("%s: toggle to %v not committed: %w", a.name, want, err)
		}
		r.doneAt[i] = time.Since(t0)
		for d := int64(r.doneAt[i]); ; {
			cur := conv.Load()
			if d <= cur || conv.CompareAndSwap(cur, d) {
				break
			}
		}
		a.active = want
		return nil
	}); err != nil {
		return err
	}
	r.toggleConv = time.Duration(conv.Load())
	return nil
}

// stepsAfterToggles: the next turn's first step records any owed notice locally, still with no
// API write; its writes count with the idle steps'.
func (sr *stormRun) stepsAfterToggles(ctx context.Context) error {
	b, agents := sr.b, sr.agents
	w0, err := b.snapWrites(ctx, sr.agentCount)
	if err != nil {
		return err
	}
	if err := parallel(sr.n, 0, func(i int) error {
		a := agents[i]
		t, err := a.c.StartTurn(ctx)
		if err != nil {
			return err
		}
		a.turn = t
		if err := sr.step(ctx, a, 1, nil); err != nil {
			return err
		}
		return a.c.EndTurn(ctx, t, harness.TurnCompleted)
	}); err != nil {
		return fmt.Errorf("steps after the toggle storm: %w", err)
	}
	sr.quiesce(ctx)
	ws, err := b.since(ctx, w0, sr.agentCount)
	if err != nil {
		return err
	}
	sr.r.idleStep = addW(sr.r.idleStep, ws)
	sr.r.idleSteps += sr.n
	return nil
}

// objectBytes is the mean size of the first k sessions of ns as the API server serves them
// (JSON, managedFields included): what each of their writes makes it decode, validate, track
// and encode again, the agents' reports as much as the controller's answers.
func (b *bench) objectBytes(ctx context.Context, ns string, agents []*agent, k int) (float64, error) {
	k = min(k, len(agents))
	var sum int
	for _, a := range agents[:k] {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.AgentSessionKind)
		if err := b.user.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.name}, u); err != nil {
			return 0, fmt.Errorf("read %s/%s: %w", ns, a.name, err)
		}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return 0, err
		}
		if b.o.objectDir != "" && sum == 0 {
			if err := os.WriteFile(filepath.Join(b.o.objectDir, "object-"+ns+".json"), raw, 0o644); err != nil {
				return 0, err
			}
		}
		sum += len(raw)
	}
	return float64(sum) / float64(k), nil
}

// profileAPIServer takes, with -profile-dir, a CPU profile of kube-apiserver over the storm
// released next (the API server's side of it, for both sides: where its time per write goes);
// the channel reports when it is written.
func (b *bench) profileAPIServer(ctx context.Context, storm, side, backend string) <-chan error {
	done := make(chan error, 1)
	if b.o.profileDir == "" {
		done <- nil
		return done
	}
	go func() {
		done <- apiServerProfile(ctx, b.cfg, apiProfileWindow, b.o.profileDir,
			fmt.Sprintf("apiserver-%s-%s-%s-%d.pprof", storm, side, backend, b.seq))
	}()
	return done
}

func addW(a, b writes) writes {
	return writes{a.status + b.status, a.other + b.other, a.events + b.events, a.agent + b.agent, a.conflicts + b.conflicts,
		a.statusSec + b.statusSec, a.statusN + b.statusN, a.terminated + b.terminated, a.refused + b.refused, a.watches + b.watches,
		a.unsent + b.unsent}
}
