package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/harness-dev/planmode-operator/test/framework"
)

// `kubectl apply -f config/samples/` works as the sample comments say, with the real kubectl on
// a control plane with the CRDs, and creates no object named like make run's demo session.
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
	out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-f", filepath.Join(root, "config", "samples")+"/").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -f config/samples/: %v\n%s", err, out)
	}
	for _, want := range []string{"agentsession.agents.harness.dev/example created", "planmodeconfig.agents.harness.dev/default created",
		// config/samples/dsh_agent.yaml: the real harness as the agent of its session.
		"agentsession.agents.harness.dev/dsh-example created", "serviceaccount/planmode-agent-dsh created",
		"rolebinding.rbac.authorization.k8s.io/planmode-agent-dsh created", "deployment.apps/dsh-example-agent created"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "agentsessions", "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatal(err, string(out))
	}
	if strings.Contains(string(out), "/demo") {
		t.Errorf("the samples create a session named like make run's demo:\n%s", out)
	}
}
