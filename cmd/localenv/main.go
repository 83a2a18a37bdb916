// Command localenv runs planmode-operator on an embedded default: a local control plane (the
// kube-apiserver and etcd that hack/envtest-binaries.sh builds), the CRDs and the validating
// webhooks with local certificates, the real manager binary with the SQLite log, and the
// reference agent on a demo session. It writes a kubeconfig and prints the commands to try
// next. Ctrl-C stops everything; so does any part exiting, with a message saying which.
//
// State is durable: etcd's data lives beside the SQLite log in the --dir folder, so a restart
// finds the sessions, their selections and open reviews where it left them, and writes nothing
// to the log on its own. The demo session and config are created only when absent.
//
// KUBECONFIG in the environment is ignored (it usually points at this tool's own kubeconfig
// from an earlier run, or at a real cluster). Only --cluster-kubeconfig runs against an
// existing cluster, and then with the credentials of that kubeconfig.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/harness-dev/planmode-operator/internal/version"
)

// The binaries a run starts, by file name, and the part names messages use.
const (
	etcdBinary      = "etcd"
	apiServerBinary = "kube-apiserver"
	managerBinary   = "manager"
	refagentBinary  = "refagent"
	demoAgentPart   = "demo agent"
)

type options struct {
	dir              string
	assets           string
	binDir           string
	namespace        string
	session          string
	noAgent          bool
	agentArgs        string
	agent            string // refagent or dsh
	dshRoot          string // the harness install (hack/harness.sh) for --agent=dsh
	dshOverlay       string // the plugin's rendered overlay (hack/dsh-plugin.sh overlay)
	managerArgs      string
	metricsPort      int
	probePort        int
	clusterConfig    string
	readyTimeout     time.Duration
	healthInterval   time.Duration
	stopTimeout      time.Duration
	crdDir, whookDir string
}

func bindFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.dir, "dir", ".planmode", "folder for the control plane's data (etcd), the SQLite log, kubeconfigs and logs; kept across runs")
	fs.StringVar(&o.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "folder with kube-apiserver, etcd and kubectl (make envtest-assets)")
	fs.StringVar(&o.binDir, "bin", "bin", "folder with the manager, refagent and kubectl-plan binaries (make build)")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace of the demo session")
	fs.StringVar(&o.session, "session", "demo", "name of the demo AgentSession (created only when absent)")
	fs.BoolVar(&o.noAgent, "no-agent", false, "do not start the demo agent")
	fs.StringVar(&o.agent, "agent", "refagent", "the demo agent: refagent (the reference agent) or dsh (the real DeepSeek harness with the "+
		"plugin of agents/dsh-plugin; a scripted local model unless DEEPSEEK_API_KEY is set, then the harness's own provider variables apply)")
	fs.StringVar(&o.dshRoot, "dsh-root", "", "with --agent=dsh: the harness install, hack/harness.sh's output (make run AGENT=dsh sets it)")
	fs.StringVar(&o.dshOverlay, "dsh-overlay", "", "with --agent=dsh: the plugin's profile overlay, hack/dsh-plugin.sh overlay's output (make run AGENT=dsh sets it)")
	fs.StringVar(&o.agentArgs, "agent-args", "--script=cmd/refagent/demo.txt --wait-for-messages", "extra arguments for the reference agent "+
		"(the demo script runs a short first turn, then a turn for each message you send; it presents a plan only in plan mode)")
	fs.StringVar(&o.managerArgs, "manager-args", "", "extra arguments for the manager")
	fs.IntVar(&o.metricsPort, "metrics-port", 0, "manager metrics port on 127.0.0.1 (0: a free one)")
	fs.IntVar(&o.probePort, "probe-port", 0, "manager health-probe port on 127.0.0.1 (0: a free one)")
	fs.StringVar(&o.clusterConfig, "cluster-kubeconfig", "", "run against the cluster of this kubeconfig instead of a local control plane: "+
		"installs the CRDs there, creates the demo PlanModeConfig and AgentSession when absent, and runs the manager (webhooks off) "+
		"and the demo agent on your machine with this kubeconfig's credentials")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 90*time.Second, "how long to wait for the control plane and the manager")
	fs.DurationVar(&o.healthInterval, "health-interval", 2*time.Second, "how often the control plane's health is checked while running")
	fs.DurationVar(&o.stopTimeout, "stop-timeout", 15*time.Second, "how long each part gets to stop before it is killed")
	fs.StringVar(&o.crdDir, "crd-dir", "config/crd/bases", "folder of the CRD manifests")
	fs.StringVar(&o.whookDir, "webhook-dir", "config/webhook", "folder of the webhook manifests")
}

func main() {
	if asHelper() { // the guard, or the shim of etcd or kube-apiserver (lifetime.go)
		return
	}
	var o options
	bindFlags(flag.CommandLine, &o)
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version.String("localenv"))
		return
	}
	// envtest logs through controller-runtime; its progress lines are this tool's own output.
	ctrllog.SetLogger(logr.Discard())
	// client-go's own messages (a failed health check while the control plane dies) would
	// interleave with this tool's; what matters is in the error localenv prints.
	klog.SetLogger(logr.Discard())
	// A write to a closed stdout (make run | tee, the tee gone with the same Ctrl-C) fails with
	// EPIPE instead of killing localenv in the middle of stopping its children.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	lt, err := newLifetime()
	if err != nil {
		fmt.Fprintf(os.Stderr, "localenv: %v\n", err)
		os.Exit(1)
	}
	// Every temporary file of the run, envtest's too, goes into its folder, which the guard
	// removes if localenv is killed.
	_ = os.Setenv("TMPDIR", lt.tmp)
	ctx := stopOnSignals(os.Stdout, lt)
	err = runWith(ctx, o, lt, os.Stdout)
	lt.close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "localenv: %v\n", err)
		os.Exit(1)
	}
}

// stopOnSignals returns a context that Ctrl-C, SIGTERM or a hangup (the terminal closed)
// cancels, saying so at once; a second one kills every process of the run at once.
func stopOnSignals(out io.Writer, lt *lifetime) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		fmt.Fprintf(out, "\n%s: stopping the demo agent, the manager and the control plane (Ctrl-C again kills them at once)...\n", signalName(sig))
		cancel()
		<-sigs
		fmt.Fprintln(out, "Killing every process of this run.")
		lt.killAll()
		lt.close()
		os.Exit(130)
	}()
	return ctx
}

func signalName(s os.Signal) string {
	switch s {
	case os.Interrupt:
		return "Ctrl-C"
	case syscall.SIGHUP:
		return "Hangup (the terminal closed)"
	}
	return s.String()
}

// errPartExited is returned when a part of the environment stopped on its own.
type errPartExited struct {
	part, detail, logPath string
}

func (e *errPartExited) Error() string {
	msg := fmt.Sprintf("the %s stopped: %s", e.part, e.detail)
	if e.logPath != "" {
		msg += "\n" + lastLines(e.logPath, 15)
	}
	return msg + "\neverything else was stopped; fix the cause and run `make run` again (state is kept)"
}

// paths are the absolute folders and addresses a run uses, settled before anything starts.
type paths struct {
	dir, binDir, store     string
	metricsAddr, probeAddr string
}

// run is one localenv run in this process, with its own lifetime (the tests' entry point).
func run(ctx context.Context, o options, out io.Writer) error {
	lt, err := newLifetime()
	if err != nil {
		return err
	}
	defer lt.close()
	return runWith(ctx, o, lt, out)
}

// runWith starts everything, prints what to try next and waits for the end: ctx (a clean stop,
// nil, however far the start got) or a part stopping on its own (an error naming it).
func runWith(ctx context.Context, o options, lt *lifetime, out io.Writer) error {
	p, unlock, err := prepare(o, out)
	if err != nil {
		return err
	}
	defer unlock()
	if kc := os.Getenv("KUBECONFIG"); kc != "" && o.clusterConfig == "" {
		fmt.Fprintf(out, "Note: KUBECONFIG=%s is set; make run ignores it and uses its own control plane in %s.\n"+
			"      To run against that cluster instead: make run CLUSTER_KUBECONFIG=%s\n", kc, p.dir, kc)
	}
	err = startAndWait(ctx, o, p, lt, out)
	if ctx.Err() != nil {
		return nil // stopped on request: whatever the start was doing, this is no failure
	}
	return err
}

func startAndWait(ctx context.Context, o options, p paths, lt *lifetime, out io.Writer) error {
	start := time.Now()
	var cp *controlPlane
	var err error
	if o.clusterConfig != "" {
		cp, err = useCluster(ctx, o, out)
	} else {
		cp, err = startLocalControlPlane(ctx, o, p.dir, lt, out)
	}
	if err != nil {
		return err
	}
	defer cp.stop()
	if err := writeStoreHint(cp.kubeconfig, p.store, o.clusterConfig != ""); err != nil {
		return err
	}

	manager, err := startManager(ctx, o, p, cp, lt, out)
	if manager != nil {
		defer manager.stop(o.stopTimeout, out)
	}
	if err != nil {
		return err
	}
	if err := announceDemo(ctx, cp, o, out); err != nil {
		return err
	}
	if o.clusterConfig == "" {
		if err := issueAgentKubeconfig(ctx, cp, o, cp.agentKubeconfig); err != nil {
			return err
		}
	}
	agent, err := startAgent(o, p, cp, lt)
	if err != nil {
		return err
	}
	if agent != nil {
		defer agent.stop(o.stopTimeout, out)
	}
	printNextSteps(out, o, cp.kubeconfig, p, time.Since(start))
	return waitForEnd(ctx, o, p, cp, manager, agent)
}

// startAgent starts the demo agent; nil with --no-agent.
func startAgent(o options, p paths, cp *controlPlane, lt *lifetime) (*process, error) {
	switch {
	case o.noAgent:
		return nil, nil
	case o.agent == agentDsh:
		proc, err := startDshAgent(o, p, cp, lt)
		if proc != nil {
			proc.name = demoAgentPart
		}
		return proc, err
	}
	agentFlags := append([]string{
		"--kubeconfig=" + cp.agentKubeconfig,
		"--store=" + p.store,
		"--namespace=" + o.namespace,
		"--name=" + o.session,
	}, strings.Fields(o.agentArgs)...)
	proc, err := startProcess(lt, filepath.Join(p.binDir, refagentBinary), agentFlags, filepath.Join(p.dir, "agent.log"), cp.agentKubeconfig)
	if proc != nil {
		proc.name = demoAgentPart
	}
	return proc, err
}

// prepare settles the folders and ports, takes the state folder's lock and clears what an
// earlier run left on it; nothing of this run runs yet.
func prepare(o options, out io.Writer) (paths, func(), error) {
	var p paths
	var err error
	if p.dir, err = filepath.Abs(o.dir); err != nil {
		return p, nil, err
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return p, nil, fmt.Errorf("create %s: %w", p.dir, err)
	}
	// The lock first: a second run on the same state is told so, whatever else it asks for.
	unlock, err := lockDir(p.dir)
	if err != nil {
		return p, nil, err
	}
	// Then what an earlier run left running on it (holders.go).
	if err := clearLeftovers(p.dir, out); err != nil {
		unlock()
		return p, nil, err
	}
	if err := settle(o, &p); err != nil {
		unlock()
		return p, nil, err
	}
	return p, unlock, nil
}

// settle finds the binaries and the manager's ports.
func settle(o options, p *paths) error {
	var err error
	if p.binDir, err = filepath.Abs(o.binDir); err != nil {
		return err
	}
	for _, b := range []string{managerBinary, refagentBinary, "kubectl-plan"} {
		if _, err := os.Stat(filepath.Join(p.binDir, b)); err != nil {
			return fmt.Errorf("%s is missing from %s: run `make build` first (make run does)", b, p.binDir)
		}
	}
	if err := checkAgentFlags(o); err != nil {
		return err
	}
	if p.metricsAddr, err = pickPort("--metrics-port", o.metricsPort); err != nil {
		return err
	}
	if p.probeAddr, err = pickPort("--probe-port", o.probePort); err != nil {
		return err
	}
	p.store = "sqlite://" + filepath.Join(p.dir, "sessions.db")
	return nil
}

// startManager runs the manager binary and waits for its readiness. The process it returns,
// also with an error, is the caller's to stop.
func startManager(ctx context.Context, o options, p paths, cp *controlPlane, lt *lifetime, out io.Writer) (*process, error) {
	managerLog := filepath.Join(p.dir, "manager.log")
	fmt.Fprintf(out, "Starting the manager (log: %s; ready within %s)...\n", managerLog, o.readyTimeout)
	flags := append(append([]string{}, cp.managerFlags...),
		"--kubeconfig="+cp.managerKubeconfig,
		"--log-store="+p.store,
		"--metrics-bind-address="+p.metricsAddr,
		"--metrics-secure=false", // plain HTTP on loopback, for the person at this machine
		"--health-probe-bind-address="+p.probeAddr,
		// Readable logs for a person at a terminal; the deployed manager keeps JSON.
		"--zap-encoder=console",
		"--zap-time-encoding=iso8601",
	)
	flags = append(flags, strings.Fields(o.managerArgs)...)
	manager, err := startProcess(lt, filepath.Join(p.binDir, managerBinary), flags, managerLog, cp.managerKubeconfig)
	if err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, "http://"+p.probeAddr+"/readyz", o.readyTimeout, manager); err != nil {
		var exited *errPartExited
		if errors.As(err, &exited) {
			exited.logPath = managerLog
			return manager, err
		}
		return manager, fmt.Errorf("the manager did not become ready: %w\n%s", err, lastLines(managerLog, 15))
	}
	return manager, nil
}

// demoTimeout bounds creating the demo objects: two API calls.
const demoTimeout = 30 * time.Second

func announceDemo(ctx context.Context, cp *controlPlane, o options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	created, err := ensureDemo(ctx, cp.client, o)
	if err != nil {
		return err
	}
	if len(created) > 0 {
		fmt.Fprintf(out, "Created %s (first run).\n", strings.Join(created, " and "))
	} else {
		fmt.Fprintf(out, "Found the demo session %s/%s from an earlier run; left as it was.\n", o.namespace, o.session)
	}
	return nil
}

// waitForEnd returns when Ctrl-C asks (nil) or any part stops on its own (an error naming it).
func waitForEnd(ctx context.Context, o options, p paths, cp *controlPlane, manager, agent *process) error {
	var agentExited <-chan struct{}
	if agent != nil {
		agentExited = agent.exited
	}
	health := cp.watch(ctx, o.healthInterval)
	select {
	case <-ctx.Done():
		return nil
	case <-manager.exited:
		return &errPartExited{part: "manager", detail: manager.describeExit(), logPath: filepath.Join(p.dir, "manager.log")}
	case <-agentExited:
		return &errPartExited{part: demoAgentPart, detail: agent.describeExit(), logPath: filepath.Join(p.dir, "agent.log")}
	case err := <-health:
		return &errPartExited{part: "control plane", detail: err.Error()}
	}
}

// lastLines returns the end of a log file for an error message: its first two lines (where a
// process that refuses its flags says why) and its last n, indented.
func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "  (no log at " + path + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n+2 {
		lines = append(append(lines[:2:2], "..."), lines[len(lines)-n:]...)
	}
	return "first and last lines of " + path + ":\n  " + strings.Join(lines, "\n  ")
}
