// Command localenv runs planmode-operator on an embedded default: a local control plane (the
// kube-apiserver and etcd that hack/envtest-binaries.sh builds), the CRDs and the validating
// webhooks with local certificates, the real manager binary with the SQLite log in a folder of
// the checkout, and the reference agent on a sample session. It writes a kubeconfig and prints
// the commands to try next. Ctrl-C stops everything.
//
// With KUBECONFIG set, it uses that cluster instead of starting one: it installs the CRDs and
// runs the manager against it (webhooks off, since the cluster cannot call back to this machine).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

type options struct {
	dir          string
	assets       string
	binDir       string
	namespace    string
	session      string
	noAgent      bool
	agentArgs    string
	managerArgs  string
	readyTimeout time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", ".planmode", "folder for the kubeconfig, the SQLite log, certificates and logs")
	flag.StringVar(&o.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"), "folder with kube-apiserver, etcd and kubectl (make envtest-assets)")
	flag.StringVar(&o.binDir, "bin", "bin", "folder with the manager, refagent and kubectl-plan binaries (make build)")
	flag.StringVar(&o.namespace, "namespace", "default", "namespace of the sample session")
	flag.StringVar(&o.session, "session", "demo", "name of the sample AgentSession")
	flag.BoolVar(&o.noAgent, "no-agent", false, "do not start the reference agent")
	flag.StringVar(&o.agentArgs, "agent-args", "--script=cmd/refagent/demo.txt --loop", "extra arguments for the reference agent "+
		"(the demo script toggles nothing itself; it leaves time to toggle mid-turn and presents a plan while in plan mode)")
	flag.StringVar(&o.managerArgs, "manager-args", "", "extra arguments for the manager")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 60*time.Second, "how long to wait for the control plane and the manager")
	flag.Parse()

	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "localenv: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	binDir, _ := filepath.Abs(o.binDir)
	for _, b := range []string{"manager", "refagent", "kubectl-plan"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("%s is missing from %s: run `make build` first (make run does)", b, binDir)
		}
	}

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = agentsv1alpha1.AddToScheme(scheme)

	start := time.Now()
	cp, err := startControlPlane(o, dir)
	if err != nil {
		return err
	}
	defer cp.stop()

	c, err := client.New(cp.cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}

	// The manager: the real binary, with the SQLite log in the checkout.
	store := "sqlite://" + filepath.Join(dir, "sessions.db")
	managerFlags := append(cp.managerFlags,
		"--kubeconfig="+cp.managerKubeconfig,
		"--log-store="+store,
		"--metrics-bind-address=127.0.0.1:18080",
		"--health-probe-bind-address=127.0.0.1:18081",
	)
	managerFlags = append(managerFlags, strings.Fields(o.managerArgs)...)
	manager, err := startProcess(filepath.Join(binDir, "manager"), managerFlags, filepath.Join(dir, "manager.log"))
	if err != nil {
		return err
	}
	defer manager.stop()

	if err := waitHealthy(ctx, "http://127.0.0.1:18081/readyz", o.readyTimeout, manager); err != nil {
		return fmt.Errorf("manager did not become ready (see %s): %w", filepath.Join(dir, "manager.log"), err)
	}

	if err := applySamples(ctx, c, o); err != nil {
		return err
	}

	if !o.noAgent {
		agentFlags := append([]string{
			"--kubeconfig=" + cp.agentKubeconfig,
			"--store=" + store,
			"--namespace=" + o.namespace,
			"--name=" + o.session,
		}, strings.Fields(o.agentArgs)...)
		agent, err := startProcess(filepath.Join(binDir, "refagent"), agentFlags, filepath.Join(dir, "agent.log"))
		if err != nil {
			return err
		}
		defer agent.stop()
	}

	printNextSteps(o, cp.kubeconfig, binDir, dir, store, time.Since(start))

	select {
	case <-ctx.Done():
		fmt.Println("\nShutting down...")
	case <-manager.exited:
		return fmt.Errorf("the manager exited (see %s): %v", filepath.Join(dir, "manager.log"), manager.err)
	}
	return nil
}

// mastersGroup makes a user of the local control plane a cluster admin.
const mastersGroup = "system:masters"

// controlPlane is the API server the manager, the agent and you talk to, with a kubeconfig for
// each of the three.
type controlPlane struct {
	cfg                                            *rest.Config
	kubeconfig, managerKubeconfig, agentKubeconfig string
	// managerFlags tell the manager how to serve its webhooks on this control plane.
	managerFlags []string
	stop         func()
}

// startControlPlane uses the cluster in KUBECONFIG when it is set, and starts a local
// kube-apiserver and etcd otherwise.
func startControlPlane(o options, dir string) (*controlPlane, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		return useCluster(path)
	}
	return startLocalControlPlane(o, dir)
}

func useCluster(kubeconfigPath string) (*controlPlane, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath)
	if err != nil {
		return nil, fmt.Errorf("load KUBECONFIG %s: %w", kubeconfigPath, err)
	}
	crds := envtest.CRDInstallOptions{Paths: []string{"config/crd/bases"}, ErrorIfPathMissing: true}
	if _, err := envtest.InstallCRDs(cfg, crds); err != nil {
		return nil, fmt.Errorf("install CRDs into the cluster of %s: %w", kubeconfigPath, err)
	}
	fmt.Printf("Using the cluster in KUBECONFIG=%s (CRDs installed; webhooks are off for a manager running outside the cluster).\n", kubeconfigPath)
	return &controlPlane{
		cfg:        cfg,
		kubeconfig: kubeconfigPath, managerKubeconfig: kubeconfigPath, agentKubeconfig: kubeconfigPath,
		managerFlags: []string{"--webhook-port=-1"},
		stop:         func() {},
	}, nil
}

func startLocalControlPlane(o options, dir string) (*controlPlane, error) {
	if o.assets == "" {
		return nil, errors.New("no control-plane binaries: set --assets or KUBEBUILDER_ASSETS (make run does)")
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: o.assets,
		CRDDirectoryPaths:     []string{"config/crd/bases"},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths:            []string{"config/webhook"},
			LocalServingHost: "127.0.0.1",
		},
	}
	fmt.Println("Starting a local control plane (kube-apiserver + etcd)...")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start the local control plane: %w", err)
	}
	cp := &controlPlane{
		cfg:               cfg,
		kubeconfig:        filepath.Join(dir, "kubeconfig"),
		managerKubeconfig: filepath.Join(dir, "manager.kubeconfig"),
		agentKubeconfig:   filepath.Join(dir, "agent.kubeconfig"),
		stop: func() {
			fmt.Println("Stopping the local control plane...")
			if err := env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "localenv: stop control plane: %v\n", err)
			}
		},
	}
	// Three identities, as in a cluster: the manager, the agent (a member of the agent group,
	// so the webhook limits it to status.agent) and you.
	for _, u := range []struct {
		user envtest.User
		path string
	}{
		{envtest.User{Name: "developer", Groups: []string{mastersGroup}}, cp.kubeconfig},
		{envtest.User{Name: "planmode-manager", Groups: []string{mastersGroup}}, cp.managerKubeconfig},
		{envtest.User{Name: "demo-agent", Groups: []string{mastersGroup, "planmode:agents"}}, cp.agentKubeconfig},
	} {
		if err := writeUserKubeconfig(env, u.user, u.path); err != nil {
			cp.stop()
			return nil, err
		}
	}
	wh := env.WebhookInstallOptions
	cp.managerFlags = []string{
		"--webhook-cert-dir=" + wh.LocalServingCertDir,
		"--webhook-host=" + wh.LocalServingHost,
		"--webhook-port=" + strconv.Itoa(wh.LocalServingPort),
	}
	return cp, nil
}

func applySamples(ctx context.Context, c client.Client, o options) error {
	if o.namespace != "default" {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", o.namespace, err)
		}
	}
	cfg := &agentsv1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: agentsv1alpha1.DefaultPlanModeConfigName},
		Spec: agentsv1alpha1.PlanModeConfigSpec{Section: "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode. " +
			"Explore and design; do not change files. Present the complete plan with exit_plan_mode, starting with a # heading.\n"},
	}
	if err := c.Create(ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the sample PlanModeConfig: %w", err)
	}
	s := &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.session},
		Spec: agentsv1alpha1.AgentSessionSpec{
			SessionID: o.session + "-session",
			PlanMode:  agentsv1alpha1.PlanModeSpec{Active: ptr.To(false)},
		},
	}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the sample AgentSession: %w", err)
	}
	return nil
}

func printNextSteps(o options, kubeconfig, binDir, dir, store string, took time.Duration) {
	assets, _ := filepath.Abs(o.assets)
	fmt.Printf(`
planmode-operator is running (up in %s).
  control plane kubeconfig: %s
  session log (SQLite):     %s
  manager log:              %s
  agent log:                %s

In another terminal:

  export KUBECONFIG=%s PATH=%s:%s:$PATH
  kubectl get agentsessions -n %s
  kubectl patch agentsession %s -n %s --type merge -p '{"spec":{"planMode":{"active":true}}}'
  kubectl plan status %s -n %s
  kubectl plan log %s -n %s --store %s
  kubectl plan off %s -n %s
  kubectl plan review %s -n %s      # once the agent posts a plan
  kubectl plan approve %s -n %s

Ctrl-C stops everything.
`, took.Round(100*time.Millisecond), kubeconfig, store, filepath.Join(dir, "manager.log"), filepath.Join(dir, "agent.log"),
		kubeconfig, binDir, assets, o.namespace,
		o.session, o.namespace, o.session, o.namespace, o.session, o.namespace, store,
		o.session, o.namespace, o.session, o.namespace, o.session, o.namespace)
}

type process struct {
	cmd *exec.Cmd
	// exited is closed once the process has exited; err then holds what cmd.Wait returned.
	exited chan struct{}
	err    error
}

func startProcess(path string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", logPath, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
		logFile.Close()
	}()
	return p, nil
}

// stop asks the process to shut down cleanly and kills it if it does not within 10 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

func waitHealthy(ctx context.Context, url string, timeout time.Duration, p *process) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok := probe(url); ok {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("process exited: %v", p.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", timeout)
		}
	}
}

func writeUserKubeconfig(env *envtest.Environment, u envtest.User, path string) error {
	user, err := env.AddUser(u, nil)
	if err != nil {
		return fmt.Errorf("create user %s: %w", u.Name, err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("render kubeconfig for %s: %w", u.Name, err)
	}
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
