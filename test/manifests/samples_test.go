package manifests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/harness-dev/planmode-operator/test/framework"
)

// makeRunDemo is what make run creates in namespace default when absent (cmd/localenv
// ensureDemo): the default PlanModeConfig and the demo session, with no selection.
const makeRunDemo = `apiVersion: agents.harness.dev/v1alpha1
kind: PlanModeConfig
metadata:
  name: default
  namespace: default
spec:
  section: |
    make run's demo guidance, which applying the samples must leave as it is.
---
apiVersion: agents.harness.dev/v1alpha1
kind: AgentSession
metadata:
  name: demo
  namespace: default
spec:
  sessionID: demo-session
`

// `kubectl apply -f config/samples/` works as the sample comments say, with the real kubectl on
// a control plane with the CRDs: it creates the example session and the config it names, leaves
// make run's demo session and default config untouched, and picks up nothing that needs more
// than the CRDs (the dsh agent sample, applied on its own as its comment says).
func TestSamplesApply(t *testing.T) {
	root := repoRoot(t)
	kubectl := kubectlPath(t, root)
	env, cfg, err := framework.Start(framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "sample-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	k := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Dir = root
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	demoState := func() string {
		t.Helper()
		return k("", "get", "planmodeconfig/default", "agentsession/demo", "-o",
			`jsonpath={range .items[*]}{.kind}/{.metadata.name} resourceVersion={.metadata.resourceVersion} spec={.spec}{"\n"}{end}`)
	}

	k(makeRunDemo, "create", "-f", "-")
	before := demoState()

	out := k("", "apply", "-f", "config/samples/")
	for _, want := range []string{"agentsession.agents.harness.dev/example created", "planmodeconfig.agents.harness.dev/example created"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply -f config/samples/ output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasSuffix(line, "/example created") {
			t.Errorf("kubectl apply -f config/samples/ applied more than the example session and config: %q\n%s", line, out)
		}
	}
	if after := demoState(); after != before {
		t.Errorf("kubectl apply -f config/samples/ changed make run's demo objects:\nbefore:\n%safter:\n%s", before, after)
	}
	if got := k("", "get", "agentsession/example", "-o", "jsonpath={.spec.planMode.configRef.name}"); got != "example" {
		t.Errorf("the sample session names config %q, want the sample config example", got)
	}

	// The dsh agent sample, applied as its own comment says.
	apply := sampleCommand(t, filepath.Join(root, "config", "samples", "dsh", "dsh_agent.yaml"))
	ns := flagAfter(apply, "-n")
	if ns == "" {
		t.Fatalf("the dsh sample's command %q names no namespace", strings.Join(apply, " "))
	}
	k("", "create", "namespace", ns)
	out = k("", apply[1:]...)
	for _, want := range []string{"planmodeconfig.agents.harness.dev/example created",
		"agentsession.agents.harness.dev/dsh-example created", "serviceaccount/planmode-agent-dsh created",
		"rolebinding.rbac.authorization.k8s.io/planmode-agent-dsh created", "secret/dsh-example-model created",
		"deployment.apps/dsh-example-agent created"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: output lacks %q:\n%s", strings.Join(apply, " "), want, out)
		}
	}
	if got := k("", "get", "-n", ns, "agentsession/dsh-example", "-o", "jsonpath={.spec.planMode.configRef.name}"); got != "example" {
		t.Errorf("the dsh sample session names config %q, want the sample config example applied with it", got)
	}
}

// sampleCommand is the `kubectl apply` command a sample's header comment gives.
func sampleCommand(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := regexp.MustCompile(`^#\s+(kubectl apply .*)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := cmd.FindStringSubmatch(sc.Text()); m != nil {
			return strings.Fields(m[1])
		}
	}
	t.Fatalf("%s: no `kubectl apply` command in its comments", path)
	return nil
}

func flagAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
