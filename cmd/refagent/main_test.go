package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// TestRefagentBinary builds cmd/refagent and runs it as a separate process against envtest,
// the real reconciler (in this process) and a SQLite log file both processes open.
func TestRefagentBinary(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "refagent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	env, cfg, err := framework.Start(framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "refagent", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	storeURL := "sqlite://" + filepath.Join(dir, "log.db")
	store, err := sessionlog.Open(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mgr, err := framework.StartManager(ctx, cfg, framework.ManagerOptions{Scheme: scheme, Setup: func(mgr ctrl.Manager) error {
		r := &controllers.AgentSessionReconciler{Client: mgr.GetClient(), Store: store}
		return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mgr.Stop() }()

	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cli"}}
	must(t, k8s.Create(ctx, ns))
	must(t, k8s.Create(ctx, &v1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "default"},
		Spec:       v1alpha1.PlanModeConfigSpec{Section: "Plan first."},
	}))
	// Plan mode selected before the agent's first turn: its first request is plan-shaped.
	must(t, k8s.Create(ctx, &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: "cli", Name: "demo"},
		Spec:       v1alpha1.AgentSessionSpec{SessionID: "cli-demo", PlanMode: v1alpha1.PlanModeSpec{Active: ptr.To(true)}},
	}))
	NewWithT(t).Eventually(func() (bool, error) {
		tail, err := store.Tail(ctx, "cli-demo")
		return tail.Active, err
	}).WithTimeout(30*time.Second).Should(BeTrue(), "the manager commits the selection between turns")

	script := filepath.Join(dir, "demo.txt")
	must(t, os.WriteFile(script, []byte("# demo\nturn explore the repo\nstep\ntool read\nretry\nstep draft it\nend\n"), 0o600))
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("--namespace", "cli", "--name", "demo", "--store", storeURL, "--script", script)
	if err != nil {
		t.Fatalf("refagent --script: %v\n%s", err, out)
	}
	for _, want := range []string{
		"turn 1 step 1: plan=true asked=false",
		"turn 1 step 2: plan=true asked=false",
		"session cli-demo: 1 turns, 2 steps, 0 asked, 0 notices, 0 failed proposals, 1 retries, 1 tool calls",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = run("--namespace", "cli", "--name", "demo", "--store", storeURL, "--turns", "2", "--steps", "3", "--step-delay", "10ms", "--quiet", "--watch-timeout", "30m")
	if err != nil {
		t.Fatalf("refagent --turns: %v\n%s", err, out)
	}
	if !strings.Contains(out, "2 turns, 6 steps") {
		t.Errorf("--turns 2 --steps 3: %s", out)
	}
	evs, err := store.ReadFrom(ctx, "cli-demo", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	types := make([]string, 0, 10)
	for _, ev := range evs[:10] {
		types = append(types, ev.Type)
	}
	if got := strings.Join(types, " "); got != "plan/mode turn/start step/start user/message request/header tool/call tool/result step/end step/start user/message" {
		t.Errorf("log starts %s", got)
	}
	if !strings.Contains(string(evs[4].Data), "Plan first.") || !strings.Contains(string(evs[4].Data), `"reason":"initial"`) {
		t.Errorf("first header is not plan-shaped: %s", evs[4].Data)
	}
	// The second process resumes the session: its first header says so.
	var resumed bool
	for _, ev := range evs[10:] {
		if ev.Type == "request/header" && strings.Contains(string(ev.Data), `"reason":"resume"`) {
			resumed = true
		}
	}
	if !resumed {
		t.Error("the second run logged no request/header with reason resume")
	}

	// A looping demo stopped with SIGINT (Ctrl-C under make run) exits 0 without a stack trace.
	var buf framework.SyncBuffer
	loop := exec.CommandContext(ctx, bin, "--kubeconfig", kubeconfig, "--namespace", "cli", "--name", "demo", "--store", storeURL, "--script", script, "--loop")
	loop.Stdout, loop.Stderr = &buf, &buf
	must(t, loop.Start())
	NewWithT(t).Eventually(buf.String).WithTimeout(30*time.Second).Should(ContainSubstring("step 1:"), "the looping agent runs a step")
	must(t, loop.Process.Signal(os.Interrupt))
	if err := loop.Wait(); err != nil {
		t.Errorf("interrupted demo agent: %v\n%s", err, buf.String())
	}
	if strings.Contains(buf.String(), "SetLogger") || strings.Contains(buf.String(), "goroutine ") {
		t.Errorf("the demo agent printed a stack trace on a clean shutdown:\n%s", buf.String())
	}
	if out, err := run("--version"); err != nil || !strings.HasPrefix(out, "refagent ") {
		t.Errorf("refagent --version: %v %q", err, out)
	}

	// Bad invocations fail with a message naming the flag and change nothing.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--namespace", "cli", "--name", "demo"}, "--store is required"},
		{[]string{"--name", "demo", "--store", storeURL}, "--namespace and --name"},
		{[]string{"--namespace", "cli", "--name", "demo", "--store", storeURL, "--turns", "0"}, "--turns and --steps must be at least 1"},
		{[]string{"--namespace", "cli", "--name", "demo", "--store", storeURL, "--watch-timeout", "1m"}, "--watch-timeout is 1m0s: give 0"},
		{[]string{"--namespace", "cli", "--name", "nope", "--store", storeURL}, "AgentSession not found"},
		{[]string{"--namespace", "cli", "--name", "demo", "--store", storeURL, "--script", filepath.Join(dir, "missing.txt")}, "--script"},
	} {
		before, _ := store.Tail(ctx, "cli-demo")
		out, err := run(tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("refagent %v: err %v, output %q; want a failure mentioning %q", tc.args, err, out, tc.want)
		}
		if after, _ := store.Tail(ctx, "cli-demo"); after.NextSeq != before.NextSeq {
			t.Errorf("refagent %v appended to the log", tc.args)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The shipped demo script parses.
func TestDemoScript(t *testing.T) {
	f, err := os.Open("demo.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := refagent.ParseScript(f)
	if err != nil {
		t.Fatalf("demo.txt: %v", err)
	}
	if len(s) == 0 || s[0].Kind != refagent.OpTurn {
		t.Fatalf("demo.txt does not start with a turn: %+v", s)
	}
}
