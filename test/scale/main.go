// Command scale is the scale benchmark (make bench-scale): the real manager binary and a floor
// binary (test/scale/floormgr: the same controller-runtime manager running the echo floor of
// test/framework/floor) each run as a process against one envtest control plane, side by side
// in the same run, on each log backend:
//
//   - boundary storm: N agents (pkg/agentsdk clients in this process) at a step boundary with
//     a pending selection all ask at once; acknowledgement latency p50/p99 as the agents see it;
//   - toggle storm: N idle sessions toggled at once; time until every status shows the
//     committed state (the floor only copies spec to status);
//   - API writes per in-turn toggle, per idle toggle and per idle step: the manager's from the
//     API server's own apiserver_request_total, minus the writes of the user and the agents
//     (counted client-side with test/framework/apicount); Events are writes, with a column
//     of their own and in the total;
//   - process footprint (VmRSS and CPU from /proc/<pid>) with N sessions idle and under the
//     storms, and with -idle-sessions (10,000) idle, where the peak since start (VmHWM) is
//     printed beside the settled RSS;
//   - log store appends/s with N concurrent sessions, and Tail cost at 1,000,000 events
//     (pkg/sessionlog's BenchmarkTailRatio, run as its test binary);
//   - webhook admission latency p50/p99 for PlanModeConfig and AgentSession writes, against the
//     same writes with no webhook registered.
//
// The step, toggle and quiesce helpers follow test/bench (the boundary benchmark at 1-100
// sessions, in-process); this command adds processes, storms and footprint.
//
//	go run ./test/scale [-sessions 1000] [-idle-sessions 10000] [-stores sqlite,postgres] [-runs 1]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/go-logr/logr"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/apicount"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

var scheme = kruntime.NewScheme()

func init() {
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	_ = corev1.AddToScheme
}

type opts struct {
	sessions     int
	idleSessions int   // the events phase's sessions: the largest of -idle-sessions
	idleSizes    []int // the idle phase's session counts
	stores       []string
	runs         int
	phases       map[string]bool
	workers      int
	sides        []string
	procEnv      []string // extra environment of both processes
	managerArgs  []string // extra flags of the manager process
	shards       int
	// shardSessions is the sessions of each shard in the shards phase (0: -sessions / -shards).
	shardSessions int
	timeout       time.Duration
	// agentWatchTimeout is the agents' agentsdk.Options.WatchTimeout.
	agentWatchTimeout time.Duration
	profileDir        string
	objectDir         string
	requestMix        bool
	tailTime          string
	floorShape        string // --status-shape of the floor process
	eventWriters      []string
	apf               bool // ordinary identities, so API Priority and Fairness queues their requests (default)
	root, tmp         string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

// The sides of every comparison: the floor process and the manager process.
const (
	sideFloor   = "floor"
	sideManager = "manager"
)

// The log stores of -stores.
const (
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
)

// The values of -floor-shape, the floor process's --status-shape.
const (
	shapeEcho    = "echo"    // the floor's own fields only
	shapeManager = "manager" // also what the manager stores
)

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	logf.SetLogger(logr.Discard())
	assets, err := framework.Assets()
	if err != nil {
		return err
	}
	root, err := framework.ModuleRoot()
	if err != nil {
		return err
	}
	o.root = root
	o.tmp, err = os.MkdirTemp("", "planmode-scale-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(o.tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	bins, err := buildProcesses(o)
	if err != nil {
		return err
	}
	env, cfg, err := framework.Start(framework.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = -1, 0
	b, err := newBench(ctx, o, env, cfg, bins)
	if err != nil {
		return err
	}
	if o.phases["log"] || (o.phases["storm"] && contains(o.stores, storePostgres)) || (o.phases["shards"] && o.stores[0] == storePostgres) {
		pg, err := pgtest.Start(ctx)
		if err != nil {
			return fmt.Errorf("start a throwaway PostgreSQL (make postgres): %w", err)
		}
		defer func() { _ = pg.Stop() }()
		b.pg = pg
	}
	if err := primeWatchCaches(ctx, cfg); err != nil {
		return err
	}
	printHeader(o, assets)
	rep, err := b.runPhases(ctx)
	if err != nil {
		return err
	}
	rep.print(os.Stdout, o)
	return nil
}

// parseFlags reads the command line into opts.
func parseFlags() (opts, error) {
	var o opts
	stores := flag.String("stores", "sqlite,postgres", "log backends of the storms (comma-separated)")
	// The shards phase repeats the storms with two manager and two floor processes, and the
	// events phase waits out the broadcaster's retries; neither is in the default run, which
	// must stay under 10 minutes.
	phases := flag.String("phases", "storm,idle,webhook,log,tail", "phases to run (comma-separated): storm, shards, idle, events, webhook, log, tail, or all")
	sides := flag.String("sides", sideFloor+","+sideManager,
		"processes measured, in their order of the odd runs (even runs reverse it); ratios are manager/floor")
	flag.IntVar(&o.shards, "shards", 2, "manager processes of the shards phase (one --shard-selector each), beside as many floor processes")
	flag.IntVar(&o.shardSessions, "shard-sessions", 0, "sessions of each shard in the shards phase (0: -sessions divided among the -shards); its log is the first of -stores")
	flag.IntVar(&o.sessions, "sessions", 1000, "sessions of the storms")
	idleSizes := flag.String("idle-sessions", "1000,10000", "session counts of the idle phase (start-up, restart and footprint; comma-separated); the events phase uses the largest")
	flag.IntVar(&o.runs, "runs", 1, "runs of the storm, shards and idle phases, the sides taking turns going first; figures are medians over runs")
	flag.IntVar(&o.workers, "workers", 8, "--max-concurrent-reconciles of both processes (cmd/manager's default)")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound of every wait; a storm's waits allow at least 60ms per session of the storm (20 minutes at 20,000)")
	flag.DurationVar(&o.agentWatchTimeout, "agent-watch-timeout", 30*time.Minute,
		"the agents' watch timeout (agentsdk.Options.WatchTimeout): each watch lasts between it and twice it. "+
			"Long by default so that no storm runs into the agents' re-watches, whose timing depends on the side's speed, not its work; "+
			"0 gives client-go's 5 to 10 minutes")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write pprof profiles here: the manager's CPU (storms, take-on) and heap (idle), and kube-apiserver's CPU over each side's storms and take-on")
	flag.StringVar(&o.objectDir, "object-dir", "", "write one session object per storm as served after the boundary storm here (object-<namespace>.json), to see what its size is made of")
	procEnv := flag.String("proc-env", "", "extra environment of both processes, e.g. GOMEMLIMIT=48MiB (comma-separated)")
	managerArgs := flag.String("manager-args", "", "extra flags of the manager process, e.g. --events=off (comma-separated)")
	flag.BoolVar(&o.requestMix, "request-mix", false, "print every request the API server served in each storm, by verb and resource (reads included)")
	flag.StringVar(&o.tailTime, "tail-benchtime", "3000x", "-test.benchtime of BenchmarkTailRatio")
	flag.BoolVar(&o.apf, "apf", true,
		"run the processes, the agents and the user as ordinary users (bound to cluster-admin), so API Priority and Fairness queues and sheds their requests as in a cluster; "+
			"-apf=false makes them system:masters, which it exempts")
	flag.StringVar(&o.floorShape, "floor-shape", shapeEcho,
		"the floor's status: echo (its own fields only) or manager (also what the manager stores: the floor for the object's size alone)")
	eventWriters := flag.String("event-writers", writerRecorder+","+writerSink,
		"Event writers of the events phase (comma-separated): recorder (controller-runtime's, which cmd/manager runs) and sink (internal/eventsink)")
	flag.Parse()
	o.eventWriters = splitList(*eventWriters)
	for _, f := range splitList(*idleSizes) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return opts{}, fmt.Errorf("-idle-sessions: %q is not a session count", f)
		}
		o.idleSizes = append(o.idleSizes, n)
		o.idleSessions = max(o.idleSessions, n)
	}
	o.stores = splitList(*stores)
	o.sides = splitList(*sides)
	o.procEnv = splitList(*procEnv)
	o.managerArgs = splitList(*managerArgs)
	o.phases = map[string]bool{}
	for _, p := range splitList(*phases) {
		if p == "all" {
			for _, q := range []string{"storm", "shards", "idle", "events", "webhook", "log", "tail"} {
				o.phases[q] = true
			}
			continue
		}
		o.phases[p] = true
	}
	if o.agentWatchTimeout != 0 && o.agentWatchTimeout < agentsdk.MinWatchTimeout {
		return opts{}, fmt.Errorf("-agent-watch-timeout is %s; use 0 (client-go's 5 to 10 minutes) or at least 5m", o.agentWatchTimeout)
	}
	if o.shards < 1 || o.shardSessions < 0 {
		return opts{}, fmt.Errorf("-shards is %d and -shard-sessions %d; use at least 1 and 0", o.shards, o.shardSessions)
	}
	if o.shardSessions == 0 {
		o.shardSessions = max(1, o.sessions/o.shards)
	}
	if len(o.stores) == 0 {
		return opts{}, errors.New("-stores is empty")
	}
	if o.floorShape != shapeEcho && o.floorShape != shapeManager {
		return opts{}, fmt.Errorf("-floor-shape is %q; use echo or manager", o.floorShape)
	}
	return o, nil
}

// buildProcesses builds what runs as a process, by side, into o.tmp, both as the Dockerfile
// builds the manager's image: static (no libc mapped in) and stripped.
func buildProcesses(o opts) (map[string]string, error) {
	bins := map[string]string{sideManager: "./cmd/manager", sideFloor: "./test/scale/floormgr"}
	for name, pkg := range bins {
		out := filepath.Join(o.tmp, name)
		b := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.Dir = o.root
		if msg, err := b.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
		bins[name] = out
	}
	return bins, nil
}

// newBench sets up the identities of the processes, the agents and the user on the control
// plane, and the processes' kubeconfig.
func newBench(ctx context.Context, o opts, env *envtest.Environment, cfg *rest.Config, bins map[string]string) (*bench, error) {
	ids, err := newIdentities(ctx, env, cfg, o.apf)
	if err != nil {
		return nil, err
	}
	kc, err := ids.procs.KubeConfig()
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(o.tmp, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	user := apicount.New()
	userClient, err := client.New(user.Wrap(ids.user), client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &bench{o: o, cfg: cfg, agentCfg: ids.agents, kubeconfig: kubeconfig, bins: bins, user: userClient, userCount: user, env: env}, nil
}

// printHeader prints what the run measures and on what.
func printHeader(o opts, assets string) {
	sessions := fmt.Sprintf("%d sessions (idle phase %s)", o.sessions, joinInts(o.idleSizes))
	if len(o.phases) == 1 && o.phases["shards"] {
		sessions = fmt.Sprintf("%d shards x %d sessions", o.shards, o.shardSessions)
	}
	fmt.Printf("planmode scale benchmark: %s, stores %s, runs %d, envtest %s, GOMAXPROCS %d, nproc %d, %s\n",
		sessions, strings.Join(o.stores, ","), o.runs, filepath.Base(assets),
		runtime.GOMAXPROCS(0), runtime.NumCPU(), time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("machine: %s\n", machine())
	if o.phases["shards"] && o.shards > 1 {
		fmt.Printf("shards phase: %d shards x %d sessions (%d in all) per side, %s log, waits bounded by %s\n",
			o.shards, o.shardSessions, o.shards*o.shardSessions, o.stores[0], o.waitFor(o.shards*o.shardSessions))
	}
	if o.apf {
		fmt.Println("identities: ordinary users (-apf): API Priority and Fairness queues the processes', agents' and user's requests")
	} else {
		fmt.Println("identities: system:masters (-apf=false): API Priority and Fairness exempts them, and the API server runs every request at once")
	}
	if len(o.procEnv)+len(o.managerArgs) > 0 {
		fmt.Printf("process environment %q, manager flags %q\n", o.procEnv, o.managerArgs)
	}
}

// runPhases runs the phases -phases selects, in a fixed order, into one report.
func (b *bench) runPhases(ctx context.Context) (*report, error) {
	o := b.o
	rep := &report{idle: map[int]map[string][]*idleResult{}}
	if o.phases["storm"] {
		if err := b.runStorms(ctx, rep); err != nil {
			return nil, err
		}
	}
	if o.phases["shards"] && o.shards > 1 {
		if err := b.runShards(ctx, rep); err != nil {
			return nil, err
		}
	}
	if o.phases["idle"] {
		if err := b.runIdle(ctx, rep); err != nil {
			return nil, err
		}
	}
	if o.phases["events"] {
		for _, w := range o.eventWriters {
			r, err := b.events(ctx, w, o.idleSessions)
			if err != nil {
				return nil, fmt.Errorf("events (%s): %w", w, err)
			}
			rep.events = append(rep.events, r)
		}
	}
	if o.phases["log"] {
		for _, st := range []string{storeSQLite, storePostgres} {
			logPhase("log store appends: %s, %d concurrent sessions", st, o.sessions)
			r, err := b.appends(ctx, st, o.sessions)
			if err != nil {
				return nil, fmt.Errorf("appends (%s): %w", st, err)
			}
			rep.appends = append(rep.appends, r)
		}
	}
	if o.phases["tail"] {
		logPhase("Tail at 10 and 1,000,000 events (pkg/sessionlog BenchmarkTailRatio)")
		r, err := b.tailRatio(ctx)
		if err != nil {
			return nil, fmt.Errorf("tail: %w", err)
		}
		rep.tail = r
	}
	if o.phases["webhook"] {
		logPhase("webhook admission latency")
		r, err := b.webhooks(ctx)
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		rep.webhook = r
	}
	return rep, nil
}

// runStorms runs the storms on every store, -runs times, each side in turn.
func (b *bench) runStorms(ctx context.Context, rep *report) error {
	o := b.o
	for run := 1; run <= o.runs; run++ {
		sides := o.sidesOf(run)
		for _, st := range o.stores {
			for _, side := range sides {
				logPhase("run %d/%d: storms, %s, %s, %d sessions", run, o.runs, st, side, o.sessions)
				r, err := b.storms(ctx, side, st, o.sessions, 1)
				if err != nil {
					return fmt.Errorf("storms (%s, %s): %w", side, st, err)
				}
				rep.addStorm(st, side, r)
			}
		}
	}
	return nil
}

// runIdle runs the idle phase at each size, -runs times, the sides taking turns going first
// as in the storms.
func (b *bench) runIdle(ctx context.Context, rep *report) error {
	o := b.o
	for run := 1; run <= o.runs; run++ {
		for _, n := range o.idleSizes {
			if rep.idle[n] == nil {
				rep.idle[n] = map[string][]*idleResult{}
			}
			for _, side := range o.sidesOf(run) {
				logPhase("run %d/%d: idle: %s, %d sessions: first start, restart, footprint", run, o.runs, side, n)
				r, err := b.idle(ctx, side, n)
				if err != nil {
					return fmt.Errorf("idle (%s, %d sessions): %w", side, n, err)
				}
				rep.idle[n][side] = append(rep.idle[n][side], r)
			}
		}
	}
	return nil
}

// runShards runs the storms with -shards processes per side, -shard-sessions each, on the first
// store, -runs times. The sides run in turn: the first side's agents are closed, its
// processes stopped and its sessions deleted, and this process's memory handed back, before
// the second side's sessions are created.
func (b *bench) runShards(ctx context.Context, rep *report) error {
	o := b.o
	st := o.stores[0]
	rep.shardStore = st
	n := o.shards * o.shardSessions
	for run := 1; run <= o.runs; run++ {
		for _, side := range o.sidesOf(run) {
			logPhase("run %d/%d: shards: %d %s processes, %s, %d sessions each (%d in all; waits bounded by %s)",
				run, o.runs, o.shards, side, st, o.shardSessions, n, o.waitFor(n))
			r, err := b.storms(ctx, side, st, n, o.shards)
			if err != nil {
				return fmt.Errorf("shards (%s, %s): %w", side, st, err)
			}
			r.benchAfter = releaseMemory()
			logPhase("  %s: agents closed, processes stopped, sessions deleted; this process now: %s", side, r.benchAfter)
			rep.addShards(side, r)
		}
	}
	return nil
}

// stormWait is the time a storm's waits allow per session, beyond -timeout: 20,000 sessions
// toggled at once on two cores take minutes, and a 10,000-session storm needed -timeout 10m.
const stormWait = 60 * time.Millisecond

// waitFor is the bound of every wait of a storm of n sessions.
func (o opts) waitFor(n int) time.Duration { return max(o.timeout, time.Duration(n)*stormWait) }

// memStat is this process's memory after a GC: heap and stacks in use, RSS and its peak.
type memStat struct {
	heap, rss, hwm int64
	goroutines     int
}

func (m memStat) String() string {
	return fmt.Sprintf("heap and stacks %s, RSS %s (peak since start %s), %d goroutines", mib(float64(m.heap)), mib(float64(m.rss)), mib(float64(m.hwm)), m.goroutines)
}

// releaseMemory collects this process's garbage, hands the free heap back to the OS and
// reports what is left: after a side's storms, the agents' memory is released before the
// next side starts its own.
func releaseMemory() memStat {
	debug.FreeOSMemory()
	h, g := heapInUse()
	return memStat{heap: int64(h), goroutines: g, rss: procStatus(os.Getpid(), "VmRSS:"), hwm: procStatus(os.Getpid(), "VmHWM:")}
}

// sidesOf is the order of the sides in run (from 1): they take turns going first, run by run,
// so that whatever the first side leaves in the API server and etcd (history, compaction due)
// falls on both.
func (o opts) sidesOf(run int) []string {
	sides := slices.Clone(o.sides)
	if run%2 == 0 {
		slices.Reverse(sides)
	}
	return sides
}

type bench struct {
	o          opts
	cfg        *rest.Config // the benchmark's own reads of metrics and profiles: system:masters
	agentCfg   *rest.Config // the agents'
	kubeconfig string
	bins       map[string]string
	user       client.Client
	userCount  *apicount.Counter
	env        *envtest.Environment
	pg         *pgtest.Server
	seq        int
	apiPID     int // kube-apiserver, for its CPU time (apiCPU)
	etcdPID    int // etcd, for its CPU time (controlPlaneCPU)
}

// apiCPU is the CPU time kube-apiserver has used so far: the work a storm costs the API server,
// whatever the queueing on this machine made of its latency.
func (b *bench) apiCPU() (time.Duration, error) {
	if b.apiPID == 0 {
		pid, err := framework.APIServerPID(b.cfg)
		if err != nil {
			return 0, err
		}
		b.apiPID = pid
	}
	return framework.ProcessCPU(b.apiPID), nil
}

// controlPlaneCPU is the CPU time kube-apiserver and etcd have used so far: with the process
// under test, what a take-on's writes cost the machine.
func (b *bench) controlPlaneCPU() (api, etcd time.Duration, err error) {
	if api, err = b.apiCPU(); err != nil {
		return 0, 0, err
	}
	if b.etcdPID == 0 {
		if b.etcdPID, err = framework.EtcdPID(b.cfg); err != nil {
			return 0, 0, err
		}
	}
	return api, framework.ProcessCPU(b.etcdPID), nil
}

// Quiet is kube-apiserver and etcd together using less than quietCPU of CPU time over
// quietWindow; awaitQuietControlPlane waits for it at most quietLimit.
const (
	quietWindow = time.Second
	quietCPU    = 50 * time.Millisecond // 5% of a core
	quietLimit  = 60 * time.Second
)

// awaitQuietControlPlane waits until kube-apiserver and etcd are quiet before a take-on or a
// storm is timed, and returns how long that took (quietLimit when they never were). The write
// counters standing still (quiesce) is not enough: the API server and etcd go on working after
// the writes of a phase, the deletion of 10,000 sessions for one, and that work would fall on
// whichever side is timed next.
func (b *bench) awaitQuietControlPlane(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	for time.Since(t0) < quietLimit {
		api0, etcd0, err := b.controlPlaneCPU()
		if err != nil {
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(quietWindow):
		}
		api1, etcd1, err := b.controlPlaneCPU()
		if err != nil {
			return 0, err
		}
		if api1-api0+etcd1-etcd0 < quietCPU {
			return time.Since(t0), nil
		}
	}
	return time.Since(t0), nil
}

func logPhase(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// machine describes the host for the report.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				var kb int64
				if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "MemTotal:")), "%d", &kb); err == nil {
					mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	return fmt.Sprintf("nproc %d, %s RAM, %s, %s/%s, %s", runtime.NumCPU(), mem, model, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
