package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// hackOutput runs a hack/ script and returns the last line it printed (the path it reports).
func hackOutput(t *testing.T, script string, args ...string) string {
	t.Helper()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "hack", script), args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/%s (make harness dsh-plugin): %v\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1]
}

// make run AGENT=dsh: the real harness with the plugin is the demo agent, on the scripted
// local model. A message sent with kubectl plan starts a turn in plan mode whose events land
// in the demo's log store; the model presents a plan, kubectl plan approve takes the session
// out of plan mode and the turn ends.
func TestDshDemoAgent(t *testing.T) {
	g := NewWithT(t)
	o := testOptions(t, t.TempDir())
	o.noAgent = false
	o.agent = agentDsh
	o.dshRoot = hackOutput(t, "harness.sh")
	o.dshOverlay = hackOutput(t, "dsh-plugin.sh", "overlay")
	s := start(t, o)
	s.waitRunning(t)
	g.Expect(s.out.String()).To(ContainSubstring("The demo agent is the DeepSeek harness (dsh) with agents/dsh-plugin"))
	g.Expect(s.out.String()).To(ContainSubstring(`kubectl plan message demo "propose the next change"`), "the banner's flow starts with a message")
	kubectlPlan := func(args ...string) {
		t.Helper()
		out, err := exec.Command(filepath.Join(binDir, "kubectl-plan"), append(args, "--kubeconfig", filepath.Join(o.dir, "kubeconfig"))...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "kubectl plan %v: %s", args, out)
	}
	kubectlPlan("message", "demo", "look around")
	c := clientFor(t, filepath.Join(o.dir, "kubeconfig"))
	agentLog := func() string { b, _ := os.ReadFile(filepath.Join(o.dir, "agent.log")); return string(b) }
	var last agentsv1alpha1.AgentSession
	g.Eventually(func() agentsv1alpha1.ReviewPhase {
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "demo"}, &last); err != nil || last.Status.Review == nil {
			return ""
		}
		return last.Status.Review.Phase
	}).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).Should(Equal(agentsv1alpha1.ReviewPending),
		func() string {
			return fmt.Sprintf("the harness presents a plan; status %+v; agent log:\n%s", last.Status, agentLog())
		})
	kubectlPlan("approve", "demo")
	g.Eventually(func(g Gomega) {
		store, err := sessionlog.OpenReadOnly(context.Background(), "sqlite://"+filepath.Join(o.dir, "sessions.db"))
		g.Expect(err).NotTo(HaveOccurred())
		defer store.Close()
		tail, err := store.Tail(context.Background(), "demo-session")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(tail.Turn).To(BeNumerically(">=", 1))
		g.Expect(tail.TurnOpen).To(BeFalse())
		g.Expect(tail.Active).To(BeFalse(), "approved: plan mode left")
	}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func TestAgentFlags(t *testing.T) {
	o := options{agent: "codex"}
	if err := checkAgentFlags(o); err == nil || !strings.Contains(err.Error(), `--agent="codex": expected refagent or dsh`) {
		t.Fatalf("unknown agent: %v", err)
	}
	o = options{agent: agentDsh}
	if err := checkAgentFlags(o); err == nil || !strings.Contains(err.Error(), "make run AGENT=dsh") {
		t.Fatalf("dsh without its install: %v", err)
	}
}
