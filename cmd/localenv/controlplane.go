package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/plancli"
)

// mastersGroup makes a user of the local control plane a cluster admin.
const mastersGroup = "system:masters"

// controlPlane is the API server the manager, the agent and you talk to, with a kubeconfig for
// each of the three.
type controlPlane struct {
	cfg                                            *rest.Config
	client                                         client.Client
	kubeconfig, managerKubeconfig, agentKubeconfig string
	// managerFlags tell the manager how to serve its webhooks on this control plane.
	managerFlags []string
	stop         func()
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = agentsv1alpha1.AddToScheme(s)
	return s
}

// useCluster runs against an existing cluster, only when asked with --cluster-kubeconfig.
func useCluster(ctx context.Context, o options, out io.Writer) (*controlPlane, error) {
	path, err := filepath.Abs(o.clusterConfig)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--cluster-kubeconfig %s: %w", path, err)
	}
	if err := readyz(ctx, cfg); err != nil {
		return nil, fmt.Errorf("--cluster-kubeconfig %s: the cluster does not answer: %w", path, err)
	}
	fmt.Fprintf(out, "Using the cluster of %s (%s), as --cluster-kubeconfig asks: installing the CRDs there; "+
		"the manager (webhooks off: the cluster cannot call back to this machine) and the demo agent run here with that kubeconfig's credentials.\n",
		path, cfg.Host)
	crds := envtest.CRDInstallOptions{Paths: []string{o.crdDir}, ErrorIfPathMissing: true}
	if _, err := envtest.InstallCRDs(cfg, crds); err != nil {
		return nil, fmt.Errorf("install CRDs into the cluster of %s: %w", path, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return nil, err
	}
	return &controlPlane{
		cfg: cfg, client: c,
		kubeconfig: path, managerKubeconfig: path, agentKubeconfig: path,
		managerFlags: []string{"--webhook-port=-1"},
		stop:         func() {},
	}, nil
}

// startLocalControlPlane starts kube-apiserver and etcd with etcd's data in dir/etcd, so
// objects survive a restart; ctx ends the start at once (Ctrl-C).
func startLocalControlPlane(ctx context.Context, o options, dir string, lt *lifetime, out io.Writer) (*controlPlane, error) {
	if err := checkAssets(o); err != nil {
		return nil, err
	}
	env, closeLogs, err := newEnvironment(o, dir, lt)
	if err != nil {
		return nil, err
	}
	etcdDir := env.ControlPlane.Etcd.DataDir
	state := "a new"
	if entries, _ := os.ReadDir(etcdDir); len(entries) > 0 {
		state = "the kept"
	}
	fmt.Fprintf(out, "Starting a local control plane (kube-apiserver + etcd, %s state in %s; up to %s)...\n", state, etcdDir, o.readyTimeout)
	begin := time.Now()
	cfg, err := startEnvironment(ctx, env, lt, o.stopTimeout)
	closeLogs() // the processes write to their own copies
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("start the local control plane: %w\n%s\n%s", err,
			lastLines(filepath.Join(dir, "etcd.log"), 10), lastLines(filepath.Join(dir, "kube-apiserver.log"), 10))
	}
	fmt.Fprintf(out, "Control plane up in %s.\n", time.Since(begin).Round(100*time.Millisecond))
	return newControlPlane(env, cfg, dir, out)
}

// checkAssets finds kube-apiserver and etcd before anything starts.
func checkAssets(o options) error {
	if o.assets == "" {
		return errors.New("no control-plane binaries: set --assets or KUBEBUILDER_ASSETS (make run does)")
	}
	for _, b := range []string{apiServerBinary, etcdBinary} {
		if _, err := os.Stat(filepath.Join(o.assets, b)); err != nil {
			return fmt.Errorf("%s is missing from %s: run `make envtest-assets` (make run does)", b, o.assets)
		}
	}
	return nil
}

// newEnvironment configures envtest: etcd's data in dir/etcd, the binaries started through
// the run's shims (lifetime.go), the API server's certificates in the run's temporary folder,
// and both processes' output in dir/etcd.log and dir/kube-apiserver.log (closeLogs closes
// localenv's copies once they run).
func newEnvironment(o options, dir string, lt *lifetime) (env *envtest.Environment, closeLogs func(), err error) {
	etcdDir := filepath.Join(dir, "etcd")
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", etcdDir, err)
	}
	certDir := filepath.Join(lt.tmp, "kube-apiserver")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, nil, err
	}
	assets, err := filepath.Abs(o.assets)
	if err != nil {
		return nil, nil, err
	}
	// The shims read these: inherited by the processes envtest starts.
	if err := os.Setenv(shimEnv, assets); err != nil {
		return nil, nil, err
	}
	if err := os.Setenv(shimParentEnv, strconv.Itoa(os.Getpid())); err != nil {
		return nil, nil, err
	}
	etcdLog, err := openRunLog(filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, nil, err
	}
	apiLog, err := openRunLog(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		_ = etcdLog.Close()
		return nil, nil, err
	}
	env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{o.crdDir},
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths:            []string{o.whookDir},
			LocalServingHost: "127.0.0.1",
		},
		ControlPlaneStartTimeout: o.readyTimeout,
		ControlPlaneStopTimeout:  o.stopTimeout,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir, Path: filepath.Join(lt.shimDir, etcdBinary), Out: etcdLog, Err: etcdLog}
	env.ControlPlane.APIServer = &envtest.APIServer{Path: filepath.Join(lt.shimDir, apiServerBinary), CertDir: certDir, Out: apiLog, Err: apiLog}
	return env, func() { _ = etcdLog.Close(); _ = apiLog.Close() }, nil
}

// startEnvironment runs env.Start on the spawning thread (lifetime.go) and hands the processes
// to the guard. ctx ends it at once: the half-started control plane is killed, and Start,
// which takes no context, is given stopTimeout to notice.
func startEnvironment(ctx context.Context, env *envtest.Environment, lt *lifetime, stopTimeout time.Duration) (*rest.Config, error) {
	type result struct {
		cfg *rest.Config
		err error
	}
	done := make(chan result, 1)
	go onSpawnThread(func() {
		cfg, err := env.Start()
		done <- result{cfg, err}
	})
	select {
	case r := <-done:
		if r.err != nil {
			_ = env.Stop() // Start may have left one of the two running
			return nil, r.err
		}
		lt.adoptShims()
		return r.cfg, nil
	case <-ctx.Done():
	}
	lt.killShims()
	select {
	case <-done:
		_ = env.Stop()
	case <-time.After(stopTimeout):
	}
	lt.killShims() // one Start forked after the first kill
	return nil, ctx.Err()
}

// newControlPlane writes a kubeconfig for each of the three identities and the manager's
// webhook flags for a started envtest environment.
func newControlPlane(env *envtest.Environment, cfg *rest.Config, dir string, out io.Writer) (*controlPlane, error) {
	cp := &controlPlane{
		cfg:               cfg,
		kubeconfig:        filepath.Join(dir, "kubeconfig"),
		managerKubeconfig: filepath.Join(dir, "manager.kubeconfig"),
		agentKubeconfig:   filepath.Join(dir, "agent.kubeconfig"),
		stop: func() {
			fmt.Fprintln(out, "Stopping the local control plane...")
			if err := env.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "localenv: stop the control plane: %v\n", err)
			}
		},
	}
	// Three identities, as in a cluster: the manager, you, and the agent, a service account
	// with a token of its own (agentidentity.go, once the demo namespace exists).
	for _, u := range []struct {
		user envtest.User
		path string
	}{
		{envtest.User{Name: "developer", Groups: []string{mastersGroup}}, cp.kubeconfig},
		{envtest.User{Name: "planmode-manager", Groups: []string{mastersGroup}}, cp.managerKubeconfig},
	} {
		if err := writeUserKubeconfig(env, u.user, u.path); err != nil {
			cp.stop()
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		cp.stop()
		return nil, err
	}
	cp.client = c
	wh := env.WebhookInstallOptions
	cp.managerFlags = []string{
		"--webhook-cert-dir=" + wh.LocalServingCertDir,
		"--webhook-host=" + wh.LocalServingHost,
		"--webhook-port=" + strconv.Itoa(wh.LocalServingPort),
	}
	return cp, nil
}

// watch reports on the returned channel once the API server has failed three health checks in a
// row (etcd's health is part of the API server's /readyz).
func (cp *controlPlane) watch(ctx context.Context, every time.Duration) <-chan error {
	ch := make(chan error, 1)
	go func() {
		failures := 0
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := readyz(ctx, cp.cfg)
			if err == nil {
				failures = 0
				continue
			}
			if ctx.Err() != nil {
				return
			}
			if failures++; failures >= 3 {
				ch <- fmt.Errorf("kube-apiserver at %s failed %d health checks in a row: %w", cp.cfg.Host, failures, err)
				return
			}
		}
	}()
	return ch
}

func readyz(ctx context.Context, cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 3 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	return dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// ensureDemo creates the demo PlanModeConfig and AgentSession when they are absent, and changes
// nothing a user could have set when they exist (a restart must not write a selection the user
// did not make): it only binds an unbound session to its agent's service account.
// The session is created with no selection (spec.planMode.active unset), which follows the log
// and appends nothing. It returns what it created.
func ensureDemo(ctx context.Context, c client.Client, o options) ([]string, error) {
	var created []string
	if o.namespace != "default" {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create namespace %s: %w", o.namespace, err)
		}
	}
	cfg := &agentsv1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: agentsv1alpha1.DefaultPlanModeConfigName},
		Spec: agentsv1alpha1.PlanModeConfigSpec{Section: "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode. " +
			"Explore and design; do not change files. Present the complete plan with exit_plan_mode, starting with a # heading.\n"},
	}
	switch err := c.Create(ctx, cfg); {
	case err == nil:
		created = append(created, "PlanModeConfig "+o.namespace+"/"+cfg.Name)
	case !apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("create the demo PlanModeConfig: %w", err)
	}
	binding := &agentsv1alpha1.AgentBinding{ServiceAccountName: demoAgentServiceAccount(o.session)}
	s := &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.session},
		Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: o.session + "-session", Agent: binding},
	}
	switch err := c.Create(ctx, s); {
	case err == nil:
		created = append(created, "AgentSession "+o.namespace+"/"+s.Name)
	case !apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("create the demo AgentSession: %w", err)
	default:
		// A session kept from a run before agents were bound: bind it, or its agent may not
		// write its status.agent.
		if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			return nil, fmt.Errorf("read the demo AgentSession: %w", err)
		}
		if s.Spec.Agent == nil {
			patch := client.MergeFrom(s.DeepCopy())
			s.Spec.Agent = binding
			if err := c.Patch(ctx, s, patch); err != nil {
				return nil, fmt.Errorf("bind the demo AgentSession to its agent's service account: %w", err)
			}
		}
	}
	return created, nil
}

// writeStoreHint records the log store in the kubeconfig's current context, so `kubectl plan
// log` finds it without --store. A user's own kubeconfig (--cluster-kubeconfig) is not edited.
func writeStoreHint(kubeconfig, store string, usersOwn bool) error {
	if usersOwn {
		return nil
	}
	if err := plancli.SetKubeconfigStore(kubeconfig, store); err != nil {
		return fmt.Errorf("record the log store in %s: %w", kubeconfig, err)
	}
	return nil
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
