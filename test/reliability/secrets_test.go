package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/connstr/connstrtest"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// No binary shows any part of a store's password, whatever form the connection string has
// (connstrtest.Forms) and whatever characters break its parsers (connstrtest.Cores): every
// binary that takes a store is run against a store that cannot be reached, and all it prints,
// the manager's log included, is searched for the password's marked ends. pkg/connstr's and
// pkg/sessionlog's fuzz targets explore the passwords; this runs the binaries themselves.
var _ = Describe("secrets in every binary's output", func() {
	It("shows no part of the password, for every form, in the manager's log and every tool's output", func() {
		root, err := framework.ModuleRoot()
		Expect(err).NotTo(HaveOccurred())
		bins := map[string]string{"manager": managerBin, "refagent": refagentBin, "plancheck": plancheckBin}
		for _, b := range []string{"planlog", "kubectl-plan"} {
			bins[b] = filepath.Join(workDir, b)
			build := exec.Command("go", "build", "-o", bins[b], "./cmd/"+b)
			build.Dir = root
			out, err := build.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "go build ./cmd/%s:\n%s", b, out)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "secrets-"}}
		Expect(k8s.Create(suiteCtx, ns)).To(Succeed())
		Expect(k8s.Create(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "demo"},
			Spec: v1alpha1.AgentSessionSpec{SessionID: ns.Name + ".demo", Agent: &v1alpha1.AgentBinding{ServiceAccountName: agentServiceAccount("demo")}}})).To(Succeed())

		// Each binary's command line, the store given where it reads it: the manager and the
		// agent from $PLANMODE_LOG_STORE (as the install gives it), the tools from --store.
		runs := func(conn string) map[string]*exec.Cmd {
			kc := filepath.Join(workDir, fmt.Sprintf("kubeconfig-secrets-%d", time.Now().UnixNano()))
			raw, err := os.ReadFile(kubeconfig)
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(kc, raw, 0o600)).To(Succeed())
			cmds := map[string]*exec.Cmd{
				"manager": exec.Command(bins["manager"], "--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-port=-1",
					"--kubeconfig="+kubeconfig, "--log-store-timeout=2s", "--zap-log-level=debug"),
				"refagent":               exec.Command(bins["refagent"], "--namespace", ns.Name, "--name", "demo"),
				"plancheck":              exec.Command(bins["plancheck"], "--store", conn, "--session", "x"),
				"planlog tail":           exec.Command(bins["planlog"], "tail", "--store", conn, "--session", "x"),
				"planlog import":         exec.Command(bins["planlog"], "import", "--store", conn),
				"planlog release":        exec.Command(bins["planlog"], "release", "--store", conn, "--session", "x", "--owner", "a/b"),
				"kubectl plan log":       exec.Command(bins["kubectl-plan"], "log", "demo", "-n", ns.Name, "--store", conn, "--kubeconfig", kubeconfig),
				"kubectl plan use-store": exec.Command(bins["kubectl-plan"], "use-store", conn, "--kubeconfig", kc),
			}
			for name, c := range cmds {
				c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
				if name == "manager" || name == "refagent" {
					c.Env = append(c.Env, "PLANMODE_LOG_STORE="+conn)
				}
			}
			return cmds
		}
		checked := 0
		// The passwords that break parsers (the fuzz targets explore the rest): an '@', a '/'
		// and a space, '?' and '#', quotes and a backslash, a ':' and an '@', a word of the text.
		cores := []string{"p@ss", "a/b c", "x?y#z", `q'u\o"te`, "u:v@w", "p"}
		for _, core := range cores {
			pw := connstrtest.Password(core)
			for _, form := range connstrtest.Forms {
				conn := form.Build(pw)
				for name, c := range runs(conn) {
					ctx, cancel := context.WithTimeout(suiteCtx, 30*time.Second)
					cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
					cmd.Env, cmd.Stdin = c.Env, nil
					out, _ := cmd.CombinedOutput()
					timedOut := ctx.Err() != nil
					cancel()
					Expect(timedOut).To(BeFalse(), "%s did not finish with an unreachable store (form %s)", name, form.Name)
					Expect(connstrtest.Leaks(string(out))).To(BeFalse(), "%s, form %s, password %q:\n%s", name, form.Name, pw, out)
					checked++
				}
			}
		}
		writeRow(row{Fault: "secrets: every binary, every connection-string form", Runs: checked,
			Note: fmt.Sprintf("%d runs (%d passwords x %d forms x 8 commands), the manager at debug level: no part of a password in any output", checked, len(cores), len(connstrtest.Forms))})
	})
})
