// Command bench measures the step-boundary protocol side by side with a floor controller, in
// one run against a real envtest control plane and a real session log:
//
//   - boundary acknowledgement latency as the agent observes it (the Boundary call of a step
//     that has a pending selection: report write -> manager -> ack -> agent's watch), median
//     and p99, for 1 and 100 concurrent sessions;
//   - API writes per toggle during a turn and between turns, and per step with nothing
//     pending, counted with a wrapping http.RoundTripper on every client in the run (manager,
//     agents; the user's own toggle writes are counted apart and not charged). The manager's
//     Events are writes like the others: their own column, and in the total.
//
// The manager side runs the real reconciler with cmd/manager's Event writer (internal/eventsink).
// The floor (test/framework/floor) answers the same boundary with no log work: it marks the
// selection pending and copies the report into lastBoundary with the current tail. The ratio
// manager/floor is the cost of plan mode itself.
//
//	go run ./test/bench [-sessions 1,100] [-cycles 100] [-cycles-many 6] [-store sqlite|postgres|URL]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/go-logr/logr"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/apicount"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

var (
	scheme      = kruntime.NewScheme()
	traceWrites bool
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type opts struct {
	sessions   []int
	cycles     int // toggle cycles per session with 1 session
	cyclesMany int // toggle cycles per session with more sessions
	idleSteps  int
	timeout    time.Duration
}

func run() error {
	o, storeSpec, err := parseFlags()
	if err != nil {
		return err
	}
	logf.SetLogger(logr.Discard())
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	assets, err := framework.Assets()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, cfg, err := framework.Start(framework.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	// Client-side rate limits off for every client: the bench measures the protocol.
	cfg.QPS, cfg.Burst = -1, 0

	url, store, closeStore, err := openStore(ctx, storeSpec)
	if err != nil {
		return err
	}
	defer closeStore()

	user := apicount.New()
	userClient, err := client.New(user.Wrap(cfg), client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	b := &bench{o: o, cfg: cfg, store: store, user: userClient}
	fmt.Printf("planmode boundary benchmark: envtest %s, store %s, GOMAXPROCS %d, %d workers per controller, manager events %s, %s\n",
		filepath.Base(assets), strings.SplitN(url, ":", 2)[0], runtime.GOMAXPROCS(0), workers, managerEvents, time.Now().UTC().Format(time.RFC3339))

	results, err := b.measureEach(ctx)
	if err != nil {
		return err
	}
	if err := report(os.Stdout, o, results); err != nil {
		return err
	}
	toggles := 0
	for _, byN := range results {
		for _, r := range byN {
			toggles += r.toggles + r.betweenTogs
		}
	}
	fmt.Printf("user (setup and the toggles themselves, not charged above): %d writes, %d toggles\n", user.Writes(), toggles)
	return nil
}

// parseFlags reads the command line into opts and the -store value.
func parseFlags() (opts, string, error) {
	var (
		o        opts
		sessions = flag.String("sessions", "1,100", "comma-separated concurrent session counts")
		storeURL = flag.String("store", "sqlite", "session log: sqlite (a file in a temp dir), postgres (a throwaway PostgreSQL server, as the tests start one), or a store URL")
	)
	flag.IntVar(&o.cycles, "cycles", 100, "toggle cycles (turns) per session when running 1 session")
	flag.IntVar(&o.cyclesMany, "cycles-many", 6, "toggle cycles per session when running many sessions")
	flag.IntVar(&o.idleSteps, "idle-steps", 5, "steps with nothing pending per session")
	flag.BoolVar(&traceWrites, "trace-writes", false, "print every API write of the controllers and agents to stderr (diagnosis)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "boundary timeout")
	flag.IntVar(&workers, "workers", workers, "MaxConcurrentReconciles of both controllers")
	flag.StringVar(&managerEvents, "manager-events", managerEvents, "manager configurations to measure: on (cmd/manager's default --events=on), off, or both")
	flag.Parse()
	if managerEvents != eventsOn && managerEvents != eventsOff && managerEvents != eventsBoth {
		return opts{}, "", fmt.Errorf("-manager-events is %q; use on, off or both", managerEvents)
	}
	for _, f := range strings.Split(*sessions, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return opts{}, "", fmt.Errorf("-sessions: %q is not a positive count", f)
		}
		o.sessions = append(o.sessions, n)
	}
	return o, *storeURL, nil
}

// openStore opens the session log -store names: sqlite is a file in a fresh temporary
// directory, postgres a database on a throwaway server, anything else a store URL. It returns
// the URL opened and a func that closes the store and removes what openStore started.
func openStore(ctx context.Context, spec string) (string, sessionlog.Store, func(), error) {
	var cleanups []func()
	closeAll := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	fail := func(err error) (string, sessionlog.Store, func(), error) {
		closeAll()
		return "", nil, nil, err
	}
	url := spec
	switch spec {
	case "sqlite":
		tmp, err := os.MkdirTemp("", "planmode-bench-")
		if err != nil {
			return fail(err)
		}
		cleanups = append(cleanups, func() { _ = os.RemoveAll(tmp) })
		url = "sqlite://" + filepath.Join(tmp, "log.db")
	case "postgres":
		pg, err := pgtest.Start(ctx)
		if err != nil {
			return fail(fmt.Errorf("start a throwaway PostgreSQL (make postgres installs it): %w", err))
		}
		cleanups = append(cleanups, func() { _ = pg.Stop() })
		if url, err = pg.CreateDatabase(ctx, "bench"); err != nil {
			return fail(err)
		}
	}
	store, err := sessionlog.Open(ctx, url)
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() { _ = store.Close() })
	return url, store, closeAll, nil
}

// measureEach measures every side with each session count of -sessions in turn; the results
// are by side name, then session count.
//
// All sides run at once, each on its own namespace, sessions and counted clients, and the
// measured work alternates between them cycle by cycle (floor, manager, ..., then the reverse
// order): drift in the machine's load is shared by every side instead of landing on whichever
// ran during a burst. A side is idle while another runs its cycle.
func (b *bench) measureEach(ctx context.Context) (map[string]map[int]*result, error) {
	results := map[string]map[int]*result{}
	for _, n := range b.o.sessions {
		fmt.Fprintf(os.Stderr, "%d session(s): setting up %d sides...\n", n, len(sides()))
		runs, err := b.setup(ctx, n)
		if err != nil {
			return nil, err
		}
		err = b.measure(ctx, runs)
		for _, rn := range runs {
			rn.close()
			if results[rn.side.name] == nil {
				results[rn.side.name] = map[int]*result{}
			}
			results[rn.side.name][n] = rn.r
		}
		if err != nil {
			return nil, fmt.Errorf("%d sessions: %w", n, err)
		}
	}
	return results, nil
}

// side is one controller under test.
type side struct {
	name string
	// start registers the controller on mgr; stop, called once mgr has stopped, ends what
	// start began beside it.
	start func(ctx context.Context, mgr ctrl.Manager, store sessionlog.Store) (stop func(), err error)
	// ready reports whether the controller has taken a new session on.
	ready func(s *v1alpha1.AgentSession) bool
	// committed reports whether a between-turns toggle to want has been applied.
	committed func(s *v1alpha1.AgentSession, t harness.Tail, want bool) bool
	// awaits reports whether a toggle to want made during a turn waits for the agent's next
	// step boundary as far as the agent's watch shows.
	awaits func(s *v1alpha1.AgentSession, want bool) bool
}

type bench struct {
	o     opts
	cfg   *rest.Config
	store sessionlog.Store
	user  client.Client
}

type result struct {
	latencies     []time.Duration // asked boundaries
	toggles       int
	toggleWrites  writes // during a turn: manager + agents
	idleSteps     int
	idleWrites    writes
	idleReads     int64 // the agents' API reads during the idle phase
	idleReadSteps int   // the steps of the idle phase
	betweenTogs   int
	betweenW      writes
	elapsed       time.Duration
}

// writes are the API writes of a phase: the manager's to AgentSessions (status), its Events
// (core or events.k8s.io), anything else it wrote, and the agents' (all status.agent).
type writes struct{ manager, events, other, agent, conflicts int64 }

// total is every write, Events included.
func (w writes) total() int64 { return w.manager + w.events + w.other + w.agent }

// butEvents is every write but the Events: what the write targets bound.
func (w writes) butEvents() int64 { return w.total() - w.events }

func (w writes) add(o writes) writes {
	return writes{w.manager + o.manager, w.events + o.events, w.other + o.other, w.agent + o.agent, w.conflicts + o.conflicts}
}

type snapshot struct {
	mgr, agent map[string]int64
	conflicts  int64
}

func snap(m, a *apicount.Counter) snapshot {
	return snapshot{m.Breakdown(), a.Breakdown(), m.Conflicts() + a.Conflicts()}
}

// since returns the writes made after s.
func (s snapshot) since(m, a *apicount.Counter) writes {
	var w writes
	for k, v := range m.Breakdown() {
		d := v - s.mgr[k]
		switch {
		case apicount.IsEventKey(k):
			w.events += d
		case strings.Contains(k, " agentsessions"):
			w.manager += d
		default:
			w.other += d
		}
	}
	for k, v := range a.Breakdown() {
		w.agent += v - s.agent[k]
	}
	w.conflicts = m.Conflicts() + a.Conflicts() - s.conflicts
	return w
}

type session struct {
	name, id string
	agent    *agentsdk.Client
	active   bool
}

// run is one side's controller, namespace, sessions and counters.
type sideRun struct {
	side                 side
	ns                   string
	sessions             []*session
	mgrCount, agentCount *apicount.Counter
	r                    *result
	close                func()
}

// setup starts every side's controller and sessions, and waits until each controller has
// taken its sessions on.
func (b *bench) setup(ctx context.Context, n int) ([]*sideRun, error) {
	var runs []*sideRun
	fail := func(err error) ([]*sideRun, error) {
		for _, rn := range runs {
			rn.close()
		}
		return nil, err
	}
	for _, s := range sides() {
		rn, err := b.setupSide(ctx, s, n)
		if err != nil {
			return fail(fmt.Errorf("%s, %d sessions: %w", s.name, n, err))
		}
		runs = append(runs, rn)
	}
	counters := []*apicount.Counter{}
	for _, rn := range runs {
		counters = append(counters, rn.mgrCount, rn.agentCount)
	}
	quiesce(counters...)
	return runs, nil
}

func (b *bench) setupSide(ctx context.Context, s side, n int) (*sideRun, error) {
	rn := &sideRun{side: s, mgrCount: apicount.New(), agentCount: apicount.New(), r: &result{}}
	var cleanups []func()
	rn.close = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		cleanups = nil
	}
	fail := func(err error) (*sideRun, error) {
		rn.close()
		return nil, err
	}
	if traceWrites {
		start := time.Now()
		trace := func(who string) func(string, string, []byte, int, time.Time, time.Time) {
			return func(method, path string, body []byte, status int, sent, answered time.Time) {
				fmt.Fprintf(os.Stderr, "%8.1fms +%.1fms %d %s %s %s %s\n", float64(sent.Sub(start).Microseconds())/1000,
					float64(answered.Sub(sent).Microseconds())/1000, status, who, method, apicount.Resource(path), body)
			}
		}
		rn.mgrCount.Trace, rn.agentCount.Trace = trace(s.name), trace("agent("+s.name+")")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + s.name + "-"}}
	if err := b.user.Create(ctx, ns); err != nil {
		return fail(err)
	}
	rn.ns = ns.Name
	// Each controller sees only its own namespace.
	cleanups = append(cleanups, func() {
		_ = b.user.DeleteAllOf(context.WithoutCancel(ctx), &v1alpha1.AgentSession{}, client.InNamespace(ns.Name))
	})
	stopSide := func() {}
	mgr, err := framework.StartManager(ctx, rn.mgrCount.Wrap(b.cfg), framework.ManagerOptions{
		Scheme:    scheme,
		Namespace: ns.Name, // each controller sees only its own namespace
		// As cmd/manager: managedFields are dropped from the cache.
		Tune: func(o *ctrl.Options) { o.Cache.DefaultTransform = cache.TransformStripManagedFields() },
		Setup: func(mgr ctrl.Manager) (err error) {
			stopSide, err = s.start(ctx, mgr, b.store)
			return err
		},
	})
	cleanups = append(cleanups, func() { stopSide() }) // after the manager has stopped: its last Events are written
	if err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, func() {
		if err := mgr.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: manager: %v\n", s.name, err)
		}
	})

	if err := b.user.Create(ctx, &v1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: v1alpha1.DefaultPlanModeConfigName},
		Spec:       v1alpha1.PlanModeConfigSpec{Section: "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."},
	}); err != nil {
		return fail(err)
	}
	rn.sessions = make([]*session, n)
	for i := range rn.sessions {
		ss := &session{name: fmt.Sprintf("agent-%03d", i), id: ns.Name + "-" + strconv.Itoa(i)}
		if err := b.user.Create(ctx, &v1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: ss.name},
			Spec:       v1alpha1.AgentSessionSpec{SessionID: ss.id},
		}); err != nil {
			return fail(err)
		}
		rn.sessions[i] = ss
	}
	agentCfg := rn.agentCount.Wrap(b.cfg)
	err = parallel(rn.sessions, func(ss *session) error {
		c, err := agentsdk.New(ctx, agentsdk.Options{Config: agentCfg, Namespace: ns.Name, Name: ss.name, Store: b.store})
		ss.agent = c
		return err
	})
	cleanups = append(cleanups, func() {
		for _, ss := range rn.sessions {
			if ss.agent != nil {
				ss.agent.Close()
			}
		}
	})
	if err != nil {
		return fail(err)
	}
	// The controller has taken every session on (the manager writes an initial status).
	if err := parallel(rn.sessions, func(ss *session) error {
		wctx, cancel := context.WithTimeout(ctx, 2*b.o.timeout)
		defer cancel()
		return ss.agent.WaitFor(wctx, s.ready)
	}); err != nil {
		return fail(fmt.Errorf("sessions not taken on by %s: %w", s.name, err))
	}
	return rn, nil
}

// phase runs f for every side, cycles times, alternating the order of the sides each cycle,
// and charges each side's writes (and wall time) in the phase to it.
func (b *bench) phase(runs []*sideRun, cycles int, f func(rn *sideRun) error, charge func(rn *sideRun, w writes, d time.Duration)) error {
	snaps := make([]snapshot, len(runs))
	spent := make([]time.Duration, len(runs))
	for i, rn := range runs {
		snaps[i] = snap(rn.mgrCount, rn.agentCount)
	}
	for c := 0; c < cycles; c++ {
		for k := range runs {
			i := k
			if c%2 == 1 {
				i = len(runs) - 1 - k
			}
			start := time.Now()
			if err := f(runs[i]); err != nil {
				return fmt.Errorf("%s: %w", runs[i].side.name, err)
			}
			spent[i] += time.Since(start)
		}
	}
	counters := []*apicount.Counter{}
	for _, rn := range runs {
		counters = append(counters, rn.mgrCount, rn.agentCount)
	}
	quiesce(counters...)
	for i, rn := range runs {
		charge(rn, snaps[i].since(rn.mgrCount, rn.agentCount), spent[i])
	}
	return nil
}

// measure runs the phases on every side's sessions and charges each side its writes.
func (b *bench) measure(ctx context.Context, runs []*sideRun) error {
	if err := b.measureIdleSteps(ctx, runs); err != nil {
		return fmt.Errorf("idle steps: %w", err)
	}
	if err := b.measureInTurnToggles(ctx, runs); err != nil {
		return fmt.Errorf("toggles during a turn: %w", err)
	}
	if err := b.measureBetweenTurnToggles(ctx, runs); err != nil {
		return fmt.Errorf("toggles between turns: %w", err)
	}
	if err := b.measureTurnAfterToggle(ctx, runs); err != nil {
		return fmt.Errorf("turn after a between-turns toggle: %w", err)
	}
	return nil
}

// measureIdleSteps: steps with nothing pending (no toggle at all).
func (b *bench) measureIdleSteps(ctx context.Context, runs []*sideRun) error {
	n := len(runs[0].sessions)
	reads := make(map[*sideRun]int64)
	for _, rn := range runs {
		reads[rn] = rn.agentCount.Reads()
	}
	return b.phase(runs, 1, func(rn *sideRun) error {
		return parallel(rn.sessions, func(ss *session) error {
			turn, err := ss.agent.StartTurn(ctx)
			if err != nil {
				return err
			}
			for step := int64(1); step <= int64(b.o.idleSteps); step++ {
				if err := b.step(ctx, ss, turn, step, nil); err != nil {
					return err
				}
			}
			return ss.agent.EndTurn(ctx, turn, harness.TurnCompleted)
		})
	}, func(rn *sideRun, w writes, d time.Duration) {
		rn.r.idleSteps += n * b.o.idleSteps
		rn.r.idleWrites = rn.r.idleWrites.add(w)
		rn.r.idleReads += rn.agentCount.Reads() - reads[rn]
		rn.r.idleReadSteps += n * b.o.idleSteps
		rn.r.elapsed += d
	})
}

// measureInTurnToggles: toggles during a turn; the timed boundary is the one that applies them.
func (b *bench) measureInTurnToggles(ctx context.Context, runs []*sideRun) error {
	n := len(runs[0].sessions)
	cycles := b.o.cycles
	if n > 1 {
		cycles = b.o.cyclesMany
	}
	return b.phase(runs, cycles, func(rn *sideRun) error {
		var mu sync.Mutex
		return parallel(rn.sessions, func(ss *session) error {
			turn, err := ss.agent.StartTurn(ctx)
			if err != nil {
				return err
			}
			if err := b.step(ctx, ss, turn, 1, nil); err != nil {
				return err
			}
			want := !ss.active
			if err := b.toggle(ctx, rn.ns, ss.name, want); err != nil {
				return err
			}
			// The agent's watch shows the selection waiting for its next boundary.
			wctx, cancel := context.WithTimeout(ctx, b.o.timeout)
			err = ss.agent.WaitFor(wctx, func(s *v1alpha1.AgentSession) bool { return rn.side.awaits(s, want) })
			cancel()
			if err != nil {
				return err
			}
			var lat time.Duration
			if err := b.step(ctx, ss, turn, 2, &lat); err != nil {
				return err
			}
			mu.Lock()
			rn.r.latencies = append(rn.r.latencies, lat)
			mu.Unlock()
			ss.active = want
			return ss.agent.EndTurn(ctx, turn, harness.TurnCompleted)
		})
	}, func(rn *sideRun, w writes, d time.Duration) {
		rn.r.toggles += n * cycles
		rn.r.toggleWrites = rn.r.toggleWrites.add(w)
		rn.r.elapsed += d
	})
}

// measureBetweenTurnToggles: toggles between turns (no turn open).
func (b *bench) measureBetweenTurnToggles(ctx context.Context, runs []*sideRun) error {
	n := len(runs[0].sessions)
	return b.phase(runs, 1, func(rn *sideRun) error {
		return parallel(rn.sessions, func(ss *session) error {
			want := !ss.active
			if err := b.toggle(ctx, rn.ns, ss.name, want); err != nil {
				return err
			}
			wctx, cancel := context.WithTimeout(ctx, b.o.timeout)
			defer cancel()
			// Re-checked on every watched change: the commit ends with a status write.
			return ss.agent.WaitFor(wctx, func(as *v1alpha1.AgentSession) bool {
				t, err := b.store.Tail(wctx, ss.id)
				if err == nil && rn.side.committed(as, t, want) {
					ss.active = want
					return true
				}
				return false
			})
		})
	}, func(rn *sideRun, w writes, d time.Duration) {
		rn.r.betweenTogs += n
		rn.r.betweenW = rn.r.betweenW.add(w)
		rn.r.elapsed += d
	})
}

// measureTurnAfterToggle: one turn each after the between-turns toggles; its first step records
// the owed notice, with no API write.
func (b *bench) measureTurnAfterToggle(ctx context.Context, runs []*sideRun) error {
	n := len(runs[0].sessions)
	return b.phase(runs, 1, func(rn *sideRun) error {
		return parallel(rn.sessions, func(ss *session) error {
			turn, err := ss.agent.StartTurn(ctx)
			if err != nil {
				return err
			}
			if err := b.step(ctx, ss, turn, 1, nil); err != nil {
				return err
			}
			return ss.agent.EndTurn(ctx, turn, harness.TurnCompleted)
		})
	}, func(rn *sideRun, w writes, d time.Duration) {
		rn.r.idleSteps += n
		rn.r.idleWrites = rn.r.idleWrites.add(w)
		rn.r.elapsed += d
	})
}
