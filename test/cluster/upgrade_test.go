//go:build cluster

package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// previousCommit is the release the upgrade starts from: the last commit before the chart, as
// users installed it then (dist/install.yaml, no Helm). UPGRADE_FROM names another commit. Once
// a release is tagged, make it that tag's commit.
const previousCommit = "8a3bc35e4361a53b9e977000874f6d3f574b0450"

// helmRelease is the Helm release name and namespace docs/operations.md uses.
const helmRelease = "planmode"

var _ = Describe("upgrading a running installation with Helm", Ordered, func() {
	var (
		hostStore          sessionlog.Store
		podURL             string
		installDir         string
		previous, cur, nxt release
		turnsSID, rollSID  string
		reviewSID          string
		turnsPod, rollPod  *corev1.Pod
		reviewPod          *corev1.Pod
	)

	BeforeAll(func() {
		podURL = pg.URLFor(nodeIP, "planmode")
		hostStore = must(sessionlog.Open(ctx, pg.URLFor("127.0.0.1", "planmode")))
		DeferCleanup(hostStore.Close)
		removeInstallation()
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				dumpManagerLogs()
				for _, p := range []*corev1.Pod{turnsPod, reviewPod, rollPod} {
					if p != nil {
						fmt.Fprintf(GinkgoWriter, "---- %s ----\n%s\n", p.Name, podLog(p))
					}
				}
			}
		})

		By("building the previous release from commit " + envOr("UPGRADE_FROM", previousCommit) + " and two releases of this tree with make release's script")
		previous = previousRelease(envOr("UPGRADE_FROM", previousCommit))
		cur = buildRelease("v0.0.0-upgrade.1")
		nxt = buildRelease("v0.0.0-upgrade.2")
		Expect(cur.Image).NotTo(Equal(nxt.Image), "two versions must be two images")
	})

	AfterAll(removeInstallation)

	It("installs the previous release from its manifests, as users did before the chart", func() {
		installDir = filepath.Join(workDir, "previous-install")
		manifest := renderInstallFrom(installDir, previous.Install, previous.Image, podURL)
		Expect(os.WriteFile(filepath.Join(installDir, "install.yaml"), manifest, 0o600)).To(Succeed())
		kubeOK("apply", "--server-side", "-f", filepath.Join(installDir, "install.yaml"))
		kubeOK("-n", systemNS, "rollout", "status", "deployment/"+managerDeploy, "--timeout=180s")
		Expect(managerImages()).To(ConsistOf(previous.Image, previous.Image))
		createAgentNamespace(podURL)
		waitWebhookServing()
		Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: "## Plan mode\nRead and plan; do not edit files.\n"},
		})).To(Succeed())
	})

	It("runs agents mid-turn: one with a selection pending at a step boundary still to come, one with its plan under review", func() {
		By("an agent that sleeps 40s inside its first turn, then steps for a minute")
		turnsSID = newSession("upgrade-turns", "planmode-agent-upgrade-turns", nil)
		script := "turn explore\nstep\nstep\nsleep 40s\n" + strings.Repeat("step\n", 60) + "end\nturn continue\n" + strings.Repeat("step\n", 20) + "end\n"
		turnsPod = agentPod("upgrade-turns", "planmode-agent-upgrade-turns", &script, "--step-delay", "1s")
		Expect(k8s.Create(ctx, turnsPod)).To(Succeed())

		By("an agent in plan mode that presents its plan and waits for the review")
		reviewSID = newSession("upgrade-review", "planmode-agent-upgrade-review", ptr(true))
		review := "turn draft the plan\nstep\nexit # Upgrade plan\\n1. roll the manager\\n2. check the log\nstep\nend\n"
		reviewPod = agentPod("upgrade-review", "planmode-agent-upgrade-review", &review, "--step-delay", "200ms", "--review-timeout", "15m")
		Expect(k8s.Create(ctx, reviewPod)).To(Succeed())
		Eventually(func() *agentsv1alpha1.ReviewStatus { return getSession("upgrade-review").Status.Review }).
			WithTimeout(podDone).WithPolling(poll).Should(HaveField("Phase", agentsv1alpha1.ReviewPending))

		By("plan mode on for the first agent while it sleeps between two steps: pending until its next boundary")
		Eventually(func() (harness.Tail, error) { return hostStore.Tail(ctx, turnsSID) }).
			WithTimeout(podDone).WithPolling(poll).Should(And(HaveField("Turn", int64(1)), HaveField("TurnOpen", true), HaveField("Step", BeNumerically(">=", 2))))
		patchSession("upgrade-turns", true)
		Eventually(func(g Gomega) {
			pm := getSession("upgrade-turns").Status.PlanMode
			g.Expect(pm.Pending).To(BeTrue())
			g.Expect(pm.Active).To(BeFalse())
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
	})

	It("takes the installation over with helm upgrade --install to the current release while they run, webhooks served throughout", func() {
		s := getSession("upgrade-turns")
		Expect(s.Status.PlanMode.Pending).To(BeTrue(), "the selection is still pending when the upgrade starts")
		Expect(getSession("upgrade-review").Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewPending))

		probe := startAdmissionProbe("upgrade-writes", "")
		started := time.Now()
		out := helmOK("upgrade", "--install", helmRelease, cur.Chart, "-n", systemNS,
			"--take-ownership", "--server-side=true", "--force-conflicts",
			"--set", "certificates.source=secret", "--set-file", "certificates.caBundle="+filepath.Join(installDir, "ca.crt"),
			"--wait", "--timeout", "5m")
		took := time.Since(started)
		admitted, failed, errs := probe.Stop()
		report := fmt.Sprintf("helm upgrade --install from %s (manifests) to %s took %s; writes during it: %d admitted, %d failed",
			previous.Version, cur.Version, fmtDuration(took), admitted, failed)
		AddReportEntry("upgrade: takeover", report)
		fmt.Fprintln(GinkgoWriter, report)
		Expect(out).To(ContainSubstring("STATUS: deployed"))
		Expect(managerImages()).To(ConsistOf(cur.Image, cur.Image), "both replicas run the current release")
		Expect(admitted).To(BeNumerically(">", 0))
		// The previous release stops serving at SIGTERM (it has no drain): a write the API server
		// sends to one of its replicas as it stops fails on the connection, and only then. The
		// releases from this one on drain (internal/webhookdrain): the rolls below admit all.
		for _, e := range errs {
			Expect(e).To(MatchRegexp(`failed calling webhook .*(connection refused|broken pipe|: EOF|connection reset by peer)`),
				"a write was refused for another reason than a stopping replica of the previous release")
		}
		if failed > 0 {
			fmt.Fprintf(GinkgoWriter, "writes that failed on a stopping replica of %s:\n%s\n", previous.Version, strings.Join(errs, "\n"))
		}

		By("Helm now owns the installation")
		var d appsv1.Deployment
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerDeploy}, &d)).To(Succeed())
		Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"))
		Expect(d.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", helmRelease))
		Expect(helmOK("status", helmRelease, "-n", systemNS)).To(ContainSubstring("STATUS: deployed"))
	})

	It("commits the pending selection at the agent's next boundary, once", func() {
		Eventually(func(g Gomega) {
			pm := getSession("upgrade-turns").Status.PlanMode
			g.Expect(pm.Active).To(BeTrue())
			g.Expect(pm.Pending).To(BeFalse())
		}).WithTimeout(podDone).WithPolling(poll).Should(Succeed())
		Expect(planModeEvents(hostStore, turnsSID)).To(Equal([]bool{true}), "one plan/mode event, for the one selection")
	})

	It("keeps the review decidable: a reviewer approves it after the upgrade and the agent goes on", func() {
		Expect(getSession("upgrade-review").Status.Review.Phase).To(Equal(agentsv1alpha1.ReviewPending), "the open review survived the upgrade")
		Expect(kubeOK("plan", "review", "upgrade-review", "-n", agentNS)).To(ContainSubstring("Upgrade plan"))
		reviewer := tokenKubeconfig("planmode-cluster-upgrade-reviewer", "planmode-agentsession-reviewer-role")
		out, err := kubeWith(reviewer, "plan", "approve", "upgrade-review", "-n", agentNS)
		Expect(err).NotTo(HaveOccurred(), out)
		waitPodSucceeded(reviewPod)
		s := getSession("upgrade-review")
		Expect(s.Status.Review).To(HaveField("Phase", agentsv1alpha1.ReviewApproved))
		Expect(must(invariant.CheckStore(ctx, hostStore, reviewSID, nil, invariant.FinalFrom(s)))).To(BeEmpty())
	})

	It("rolls to the next release with helm upgrade and back with helm rollback, agents stepping and every write admitted", func() {
		rollSID = newSession("upgrade-roll", "planmode-agent-upgrade-roll", nil)
		rollPod = agentPod("upgrade-roll", "planmode-agent-upgrade-roll", nil, "--turns", "60", "--steps", "4", "--step-delay", "300ms")
		Expect(k8s.Create(ctx, rollPod)).To(Succeed())
		Eventually(func() (harness.Tail, error) { return hostStore.Tail(ctx, rollSID) }).
			WithTimeout(podDone).WithPolling(poll).Should(HaveField("TurnOpen", true))

		for _, step := range []struct {
			what  string
			image string
			args  []string
		}{
			{"helm upgrade to " + nxt.Version, nxt.Image, []string{"upgrade", helmRelease, nxt.Chart, "-n", systemNS, "--reset-then-reuse-values", "--wait", "--timeout", "5m"}},
			{"helm rollback to revision 1 (" + cur.Version + ")", cur.Image, []string{"rollback", helmRelease, "1", "-n", systemNS, "--wait", "--timeout", "5m"}},
		} {
			probe := startAdmissionProbe("upgrade-writes", "upgrade-roll")
			started := time.Now()
			helmOK(step.args...)
			took := time.Since(started)
			admitted, failed, errs := probe.Stop()
			report := fmt.Sprintf("%s took %s; writes during it: %d admitted, %d failed (%d plan-mode toggles)", step.what, fmtDuration(took), admitted, failed, probe.toggles.Load())
			AddReportEntry("upgrade: "+step.what, report)
			fmt.Fprintln(GinkgoWriter, report)
			Expect(managerImages()).To(ConsistOf(step.image, step.image))
			Expect(errs).To(BeEmpty(), "writes refused during %s", step.what)
		}
		Expect(helmOK("history", helmRelease, "-n", systemNS)).To(MatchRegexp(`(?m)^3\s.*deployed.*Rollback to 1`))

		By("the sessions' logs hold every plan-mode change once, and the invariants hold")
		patchSession("upgrade-roll", false)
		waitPodSucceeded(rollPod)
		waitPodSucceeded(turnsPod)
		for name, sid := range map[string]string{"upgrade-turns": turnsSID, "upgrade-roll": rollSID} {
			Eventually(func() bool { return getSession(name).Status.PlanMode.Pending }).WithTimeout(settle).WithPolling(poll).Should(BeFalse())
			s := getSession(name)
			Expect(must(invariant.CheckStore(ctx, hostStore, sid, nil, invariant.FinalFrom(s)))).To(BeEmpty(), "invariant violations in %s", name)
		}
	})
})

// removeInstallation removes what an earlier run of any spec of the suite left: the Helm
// release, the manifests' objects, the CRDs the chart keeps, the agents' namespace.
func removeInstallation() {
	_, _ = kube("delete", "namespace", agentNS, "--ignore-not-found", "--wait=true", "--timeout=120s")
	_, _ = helm("uninstall", helmRelease, "-n", systemNS, "--wait", "--timeout", "2m")
	_, _ = kube("delete", "-f", filepath.Join(root, "dist", "install.yaml"), "--ignore-not-found", "--wait=true", "--timeout=120s")
	_, _ = kube("delete", "secret", "-n", systemNS, "webhook-server-cert", "planmode-log-store", "--ignore-not-found")
	_, _ = kube("delete", "namespace", systemNS, "--ignore-not-found", "--wait=false")
	// The next spec installs into the same namespaces: wait until they are gone, not just going.
	for _, ns := range []string{agentNS, systemNS} {
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
		}).WithTimeout(5*time.Minute).WithPolling(time.Second).Should(BeTrue(), func() string {
			return fmt.Sprintf("namespace %s is still there: %s", ns, namespaceConditions(ns))
		})
	}
}

// namespaceConditions says why a namespace is not gone yet.
func namespaceConditions(name string) string {
	var ns corev1.Namespace
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, c := range ns.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s %s; ", c.Type, c.Status, c.Message)
	}
	return b.String()
}

// managerImages are the images of the manager pods that are not terminating.
func managerImages() []string {
	GinkgoHelper()
	pods := managerPods()
	images := make([]string, 0, len(pods))
	for _, p := range pods {
		images = append(images, p.Spec.Containers[0].Image)
	}
	return images
}

// planModeEvents lists the active value of each plan/mode event in a session's log.
func planModeEvents(store sessionlog.Store, sid string) []bool {
	GinkgoHelper()
	var active []bool
	for _, e := range must(store.ReadFrom(ctx, sid, 0, 0)) {
		if e.Type != "plan/mode" {
			continue
		}
		a, err := harness.DecodePlanMode(e.Data)
		Expect(err).NotTo(HaveOccurred())
		active = append(active, a)
	}
	return active
}

// createAgentNamespace creates the agents' namespace, Pod Security restricted, with the
// log-store Secret the agent pods read.
func createAgentNamespace(storeURL string) {
	GinkgoHelper()
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
	}}})).To(Succeed())
	Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: storeSecret},
		StringData: map[string]string{"url": storeURL},
	})).To(Succeed())
}
