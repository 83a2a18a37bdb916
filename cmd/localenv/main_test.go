package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// binDir holds the manager, refagent and kubectl-plan binaries, and localenv itself, built once
// for the package.
var binDir string

func TestMain(m *testing.M) {
	// A run starts this test binary as its guard and as the shim of etcd and kube-apiserver.
	if asHelper() {
		return
	}
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "localenv-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := framework.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/manager", "./cmd/refagent", "./cmd/kubectl-plan", "./cmd/localenv")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	binDir = dir
	return m.Run()
}

func testOptions(t *testing.T, dir string) options {
	t.Helper()
	assets, err := framework.Assets()
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return options{
		dir: dir, assets: assets, binDir: binDir, namespace: "default", session: "demo", noAgent: true,
		crdDir: filepath.Join(root, "config/crd/bases"), whookDir: filepath.Join(root, "config/webhook"),
		readyTimeout: 2 * time.Minute, healthInterval: 300 * time.Millisecond, stopTimeout: 15 * time.Second,
	}
}

// started is one localenv run in this process.
type started struct {
	out    *framework.SyncBuffer
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, o options) *started {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &started{out: &framework.SyncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, o, s.out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-s.done; err != nil {
			t.Logf("localenv returned: %v", err)
		}
	})
	return s
}

// waitRunning waits for the "is running" banner, failing early if run returns.
func (s *started) waitRunning(t *testing.T) {
	t.Helper()
	deadline := time.After(3 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(s.out.String(), "planmode-operator is running") {
		select {
		case err := <-s.done:
			s.done <- err // for start's cleanup, which waits for run's result
			t.Fatalf("localenv returned before it was up: %v\n%s", err, s.out.String())
		case <-deadline:
			t.Fatalf("localenv not up after 3 minutes:\n%s", s.out.String())
		case <-tick.C:
		}
	}
}

func (s *started) stop(t *testing.T) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(time.Minute):
		t.Fatalf("localenv did not stop within a minute of Ctrl-C:\n%s", s.out.String())
		return nil
	}
}

// children lists this process's child processes by command name.
func children(t *testing.T) map[string][]int {
	t.Helper()
	return childrenOf(t, os.Getpid())
}

// childrenOf lists the live child processes of parent by command name.
func childrenOf(t *testing.T, parent int) map[string][]int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		comm := s[strings.IndexByte(s, '(')+1 : i]
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == parent {
			out[comm] = append(out[comm], pid)
		}
	}
	return out
}

// expectNoControlPlane checks that localenv's processes are gone. A process killed after its
// stop timeout may take a moment to be reaped, so this polls briefly.
func expectNoControlPlane(t *testing.T) {
	t.Helper()
	NewWithT(t).Eventually(func() map[string][]int {
		left := children(t)
		for name := range left {
			if name != "etcd" && name != "kube-apiserver" && name != "manager" {
				delete(left, name)
			}
		}
		return left
	}).WithTimeout(10*time.Second).Should(BeEmpty(), "processes still running after localenv returned")
}

func clientFor(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func logTail(t *testing.T, dir string) (active bool, nextSeq int64) {
	t.Helper()
	store, err := sessionlog.OpenReadOnly(context.Background(), "sqlite://"+filepath.Join(dir, "sessions.db"))
	if err != nil {
		return false, -1
	}
	defer store.Close()
	tail, err := store.Tail(context.Background(), "demo-session")
	if err != nil {
		return false, -1
	}
	return tail.Active, tail.NextSeq
}

// reconciles reads the manager's successful AgentSession reconciles from its metrics.
func reconciles(metricsAddr string) int {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "controller_runtime_reconcile_total{") && strings.Contains(l, `result="success"`) {
			f := strings.Fields(l)
			n, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += int(n)
		}
	}
	return total
}

func freePort(t *testing.T) int {
	t.Helper()
	addr, err := pickPort("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// A restart keeps the control plane's objects and the user's selection, and writes nothing to
// the log; even with the control plane's data lost, the demo session is recreated without a
// selection, so the log still gains nothing. KUBECONFIG pointing elsewhere is ignored, said so.
func TestRestartKeepsStateAndAppendsNothing(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.kubeconfig")
	if err := os.WriteFile(elsewhere, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    server: https://127.0.0.1:1\n"+
		"contexts:\n- name: x\n  context:\n    cluster: x\n    user: x\ncurrent-context: x\nusers:\n- name: x\n  user:\n    token: t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", elsewhere)
	o := testOptions(t, dir)
	o.metricsPort = freePort(t)
	metricsAddr := "127.0.0.1:" + strconv.Itoa(o.metricsPort)

	first := start(t, o)
	first.waitRunning(t)
	g.Expect(first.out.String()).To(ContainSubstring("Note: KUBECONFIG=" + elsewhere + " is set; make run ignores it"))
	g.Expect(first.out.String()).To(ContainSubstring("Created PlanModeConfig default/default and AgentSession default/demo (first run)."))
	c := clientFor(t, filepath.Join(dir, "kubeconfig"))
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "default", Name: "demo"}
	as := &agentsv1alpha1.AgentSession{}
	g.Expect(c.Get(ctx, key, as)).To(Succeed())
	g.Expect(as.Spec.PlanMode.Active).To(BeNil(), "the demo session is created without a selection")
	uid := as.UID
	g.Expect(c.Patch(ctx, as, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"planMode":{"active":true}}}`)))).To(Succeed())
	g.Eventually(func() bool { a, _ := logTail(t, dir); return a }).WithTimeout(time.Minute).Should(BeTrue(), "the manager commits the selection")
	_, seq := logTail(t, dir)

	g.Expect(first.stop(t)).To(Succeed())
	expectNoControlPlane(t)

	second := start(t, o)
	second.waitRunning(t)
	g.Expect(second.out.String()).To(ContainSubstring("the kept state"))
	g.Expect(second.out.String()).To(ContainSubstring("Found the demo session default/demo from an earlier run; left as it was."))
	c = clientFor(t, filepath.Join(dir, "kubeconfig"))
	g.Expect(c.Get(ctx, key, as)).To(Succeed())
	g.Expect(as.UID).To(Equal(uid), "the same object, not a recreated one")
	g.Expect(as.Spec.PlanMode.Active).To(HaveValue(BeTrue()), "the selection survives the restart")
	// Once the restarted manager has reconciled, the log is exactly as it was.
	g.Eventually(func() int { return reconciles(metricsAddr) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 1))
	active, after := logTail(t, dir)
	g.Expect(active).To(BeTrue())
	g.Expect(after).To(Equal(seq), "a restart appended to the session log")
	g.Expect(second.stop(t)).To(Succeed())
	expectNoControlPlane(t)

	// The control plane's data lost, the log kept: the session is recreated without a selection.
	g.Expect(os.RemoveAll(filepath.Join(dir, "etcd"))).To(Succeed())
	third := start(t, o)
	third.waitRunning(t)
	g.Expect(third.out.String()).To(ContainSubstring("Created PlanModeConfig"))
	g.Eventually(func() int { return reconciles(metricsAddr) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 1))
	c = clientFor(t, filepath.Join(dir, "kubeconfig"))
	g.Eventually(func() bool {
		fresh := &agentsv1alpha1.AgentSession{}
		return c.Get(ctx, key, fresh) == nil && fresh.Status.ObservedGeneration == fresh.Generation && fresh.Status.PlanMode.Active
	}).WithTimeout(time.Minute).Should(BeTrue(), "the recreated session shows the log's committed state")
	active, after = logTail(t, dir)
	g.Expect(active).To(BeTrue())
	g.Expect(after).To(Equal(seq), "recreating the demo session appended to the session log")

	// kubectl plan finds the store through the kubeconfig make run wrote.
	kubectlPlan := exec.Command(filepath.Join(binDir, "kubectl-plan"), "log", "demo", "--kubeconfig", filepath.Join(dir, "kubeconfig"))
	kubectlPlan.Env = append(os.Environ(), "PLANMODE_LOG_STORE=", "KUBECONFIG=")
	out, err := kubectlPlan.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("plan mode on (active=true)"))

	// A second localenv on the same folder refuses at once.
	err = run(context.Background(), o, io.Discard)
	g.Expect(err).To(MatchError(And(ContainSubstring("another make run (pid "+strconv.Itoa(os.Getpid())+": "), ContainSubstring(") is using "+dir))))
}

// When the manager dies, localenv says so with the end of its log, stops the control plane and
// returns; a manager that cannot start at all does the same before the banner.
func TestManagerExitStopsEverything(t *testing.T) {
	g := NewWithT(t)
	o := testOptions(t, t.TempDir())
	s := start(t, o)
	s.waitRunning(t)
	managers := children(t)["manager"]
	g.Expect(managers).To(HaveLen(1))
	g.Expect(syscall.Kill(managers[0], syscall.SIGKILL)).To(Succeed())
	var err error
	select {
	case err = <-s.done:
		s.done <- err
	case <-time.After(time.Minute):
		t.Fatalf("localenv still running a minute after the manager died:\n%s", s.out.String())
	}
	var exited *errPartExited
	g.Expect(errors.As(err, &exited)).To(BeTrue(), "%v", err)
	g.Expect(exited.part).To(Equal("manager"))
	g.Expect(err.Error()).To(ContainSubstring("it was killed by signal killed"))
	g.Expect(err.Error()).To(ContainSubstring("first and last lines of " + filepath.Join(o.dir, "manager.log")))
	g.Expect(s.out.String()).To(ContainSubstring("Stopping the local control plane..."))
	expectNoControlPlane(t)

	bad := testOptions(t, t.TempDir())
	bad.managerArgs = "--no-such-flag"
	err = run(context.Background(), bad, io.Discard)
	g.Expect(errors.As(err, &exited)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("it exited with status 2"))
	g.Expect(err.Error()).To(ContainSubstring("flag provided but not defined: -no-such-flag"))
	expectNoControlPlane(t)

	// etcd dying takes the API server's health with it: the run ends, naming the control plane.
	cp := start(t, testOptions(t, t.TempDir()))
	cp.waitRunning(t)
	etcds := children(t)["etcd"]
	g.Expect(etcds).To(HaveLen(1))
	g.Expect(syscall.Kill(etcds[0], syscall.SIGKILL)).To(Succeed())
	select {
	case err = <-cp.done:
		cp.done <- err
	case <-time.After(2 * time.Minute):
		t.Fatalf("localenv still running two minutes after etcd died:\n%s", cp.out.String())
	}
	g.Expect(errors.As(err, &exited)).To(BeTrue(), "%v", err)
	g.Expect(exited.part).To(Equal("control plane"))
	g.Expect(err.Error()).To(ContainSubstring("health checks in a row"))
	expectNoControlPlane(t)

	// The demo agent ending (here: a script of one turn, no --loop) ends the run the same way.
	short := testOptions(t, t.TempDir())
	short.noAgent = false
	short.agentArgs = "--turns=1 --steps=1"
	err = run(context.Background(), short, io.Discard)
	g.Expect(errors.As(err, &exited)).To(BeTrue(), "%v", err)
	g.Expect(exited.part).To(Equal("demo agent"))
	g.Expect(err.Error()).To(ContainSubstring("it exited with status 0"))
	g.Expect(err.Error()).To(ContainSubstring("1 turns, 1 steps"))
	expectNoControlPlane(t)
}

// A port given by flag that is taken is refused before anything starts, naming the flag; port
// 0 picks a free one.
func TestPortConflict(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	o := testOptions(t, t.TempDir())
	o.probePort = taken
	err = run(context.Background(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--probe-port %d: port is taken", taken)) {
		t.Fatalf("run with a taken --probe-port: %v", err)
	}
	if left := children(t); len(left["etcd"])+len(left["kube-apiserver"]) > 0 {
		t.Fatalf("a control plane was started before the port check: %v", left)
	}
	a, err := pickPort("--metrics-port", 0)
	if err != nil || a == "127.0.0.1:0" {
		t.Fatalf("pickPort(0) = %q, %v", a, err)
	}
}

// An existing cluster is used only when --cluster-kubeconfig names it: then the CRDs and the
// demo objects are created there, the manager runs against it with webhooks off, and the
// user's kubeconfig file is not edited.
func TestClusterOnlyWhenAsked(t *testing.T) {
	g := NewWithT(t)
	env, cfg, err := framework.Start(framework.Options{NoCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "cluster-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "cluster.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, t.TempDir())
	o.clusterConfig = kubeconfig
	s := start(t, o)
	s.waitRunning(t)
	g.Expect(s.out.String()).To(ContainSubstring("Using the cluster of " + kubeconfig))
	g.Expect(s.out.String()).To(ContainSubstring("as --cluster-kubeconfig asks"))
	g.Expect(s.out.String()).NotTo(ContainSubstring("Starting a local control plane"))
	c := clientFor(t, kubeconfig)
	as := &agentsv1alpha1.AgentSession{}
	g.Expect(c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "demo"}, as)).To(Succeed())
	g.Expect(as.Spec.PlanMode.Active).To(BeNil())
	after, err := os.ReadFile(kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(kc), "the user's kubeconfig was edited")
	g.Expect(s.stop(t)).To(Succeed())
	g.Expect(children(t)["manager"]).To(BeEmpty())
}
