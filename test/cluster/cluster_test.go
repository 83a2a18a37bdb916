//go:build cluster

package cluster

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	utilptr "k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/chatmodel"
	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

const (
	agentNS = "planmode-cluster-agents"
	poll    = 200 * time.Millisecond
	// settle bounds what the deployed manager does after a change, on a shared 2-core machine.
	settle = 60 * time.Second
	// podDone bounds an agent or probe pod from creation to completion.
	podDone = 3 * time.Minute
	// takeoverSlack is what client-go's leader election adds to the lease duration before a
	// candidate takes a lease that was not released: the candidate counts the duration from when
	// it observed the last renewal, and it looks once per retry period with a jitter of 1.2
	// (controller-runtime's default period, 2 s: up to 4.4 s between looks), so up to one look
	// late on each end; plus three seconds for this test's polling and the candidate's API round
	// trips (a read and an update per look) on a loaded two-core machine.
	takeoverSlack = 2*4400*time.Millisecond + 3*time.Second
	// managerTerminationGrace is the manager pod's terminationGracePeriodSeconds (config/manager).
	managerTerminationGrace = 10 * time.Second
	// dshAnswer is the scripted model's reply to the harness in the agent pod.
	dshAnswer = "scripted answer from the test process"
	// storeSecret holds the log-store URL the agent pods read (PLANMODE_LOG_STORE).
	storeSecret = "planmode-log-store"
)

var _ = Describe("the operator deployed from dist/install.yaml", Ordered, func() {
	var (
		manifest   []byte
		hostStore  sessionlog.Store
		podURL     string // the PostgreSQL log as pods reach it
		boundaries []time.Duration
	)

	BeforeAll(func() {
		podURL = pg.URLFor(nodeIP, "planmode")
		hostStore = must(sessionlog.Open(ctx, pg.URLFor("127.0.0.1", "planmode")))
		DeferCleanup(hostStore.Close)

		By("removing what an earlier run, or another spec of the suite, left")
		removeInstallation()

		manifest = renderInstall(filepath.Join(workDir, "install"), images["MANAGER_IMAGE"], podURL)
		Expect(os.WriteFile(filepath.Join(workDir, "install.yaml"), manifest, 0o600)).To(Succeed())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				dumpManagerLogs()
			}
		})
	})

	AfterAll(func() {
		_, _ = kube("delete", "namespace", agentNS, "--ignore-not-found", "--wait=true", "--timeout=120s")
		_, _ = kube("delete", "-f", filepath.Join(workDir, "install.yaml"), "--ignore-not-found", "--wait=true", "--timeout=120s")
		_, _ = kube("delete", "clusterrolebinding", "planmode-cluster-test-metrics", "--ignore-not-found")
	})

	It("installs through the overlay and the manager Deployment becomes Available with two replicas", func() {
		out := kubeOK("apply", "--server-side", "--force-conflicts", "-f", filepath.Join(workDir, "install.yaml"))
		Expect(out).To(ContainSubstring("deployment.apps/%s serverside-applied", managerDeploy))
		Expect(out).NotTo(ContainSubstring("cert-manager.io"), "the overlay drops cert-manager's objects")
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerDeploy}, &d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(images["MANAGER_IMAGE"]))
			g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
			g.Expect(d.Status.UpdatedReplicas).To(Equal(int32(2)))
			avail := deploymentCondition(&d, appsv1.DeploymentAvailable)
			g.Expect(avail).To(Equal(corev1.ConditionTrue))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		kubeOK("wait", "--for=condition=Available", "deployment/"+managerDeploy, "-n", systemNS, "--timeout=10s")
		By("one replica holds the leader lease")
		Eventually(func() string { return leaseHolder() }).WithTimeout(settle).WithPolling(poll).ShouldNot(BeEmpty())
	})

	It("runs its pods under Pod Security restricted, enforced by the namespace label", func() {
		var ns corev1.Namespace
		Expect(k8s.Get(ctx, client.ObjectKey{Name: systemNS}, &ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		By("the manager pods were admitted under it and run as a non-root user of the image")
		pods := managerPods()
		Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			Expect(p.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		}
		By("a pod that breaks restricted is refused in the same namespace")
		bad := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: "not-restricted"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: images["PROBE_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
			}}},
		}
		err := k8s.Create(ctx, bad)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))

		By("the agents' namespace enforces restricted too")
		agentNamespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted",
		}}}
		Expect(k8s.Create(ctx, agentNamespace)).To(Succeed())
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: storeSecret},
			StringData: map[string]string{"url": podURL},
		})).To(Succeed())
	})

	It("serves the webhook through its Service over TLS: a bad PlanModeConfig is refused, a good one admitted", func() {
		var svc corev1.Service
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: webhookService}, &svc)).To(Succeed())
		bad := &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: " \n\t"},
		}
		// The webhook Service may have no ready endpoint for a moment after the rollout.
		var err error
		Eventually(func() error {
			err = k8s.Create(ctx, bad.DeepCopy())
			if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
				return err
			}
			return nil
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
		Expect(err).To(HaveOccurred(), "a blank section must be refused")
		Expect(err.Error()).To(ContainSubstring(`admission webhook "vplanmodeconfig-v1alpha1.agents.harness.dev" denied the request`))
		Expect(err.Error()).To(ContainSubstring("spec.section"))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(bad), &agentsv1alpha1.PlanModeConfig{}))).To(BeTrue(), "nothing was stored")

		good := bad.DeepCopy()
		good.Spec.Section = "## Plan mode\nRead, think and propose a plan; do not edit files.\n"
		Expect(k8s.Create(ctx, good)).To(Succeed())
	})

	It("runs an agent pod with its own ServiceAccount: its turns land in the PostgreSQL log on the host", func() {
		sid := newSession("turns", "planmode-agent-turns", nil)
		pod := agentPod("turns", "planmode-agent-turns", nil, "--turns", "10", "--steps", "3", "--step-delay", "400ms")
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		By("toggling plan mode during turns: the agent reports each boundary with a selection pending, the manager answers")
		for i := int64(1); i <= 8; i++ {
			Eventually(func() (harness.Tail, error) { return hostStore.Tail(ctx, sid) }).
				WithTimeout(podDone).WithPolling(poll).Should(And(HaveField("Turn", BeNumerically(">=", i)), HaveField("TurnOpen", true)))
			active := i%2 == 1
			patchSession("turns", active)
			Eventually(func(g Gomega) {
				s := getSession("turns")
				g.Expect(s.Status.PlanMode.Active).To(Equal(active))
				g.Expect(s.Status.PlanMode.Pending).To(BeFalse())
			}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
		}
		out := waitPodSucceeded(pod)
		Expect(out).To(ContainSubstring("10 turns, 30 steps"))
		acked := boundaryLatencies(out)
		Expect(acked).NotTo(BeEmpty(), "no boundary was reported and answered:\n%s", out)
		boundaries = append(boundaries, acked...)

		t := must(hostStore.Tail(ctx, sid))
		Expect(t.Turn).To(Equal(int64(10)))
		Expect(t.TurnOpen).To(BeFalse())
		s := getSession("turns")
		Expect(s.Status.Agent).NotTo(BeNil(), "the agent reported through the status subresource with its own token")
		v := must(invariant.CheckStore(ctx, hostStore, sid, nil, invariant.FinalFrom(s)))
		Expect(v).To(BeEmpty(), "invariant violations in session %s", sid)
	})

	It("toggles plan mode with kubectl plan, and a reviewer's token approves the plan review", func() {
		sid := newSession("review", "planmode-agent-review", nil)
		script := "turn explore\nstep\nstep\nstep\nstep\nend\nturn draft the plan\nstep\nexit # Migration plan\\n1. add the column\\n2. backfill\nstep\nend\n"
		pod := agentPod("review", "planmode-agent-review", &script, "--step-delay", "700ms")
		Expect(k8s.Create(ctx, pod)).To(Succeed())

		By("kubectl plan on while turn 1 runs: committed at a step boundary")
		Eventually(func() (harness.Tail, error) { return hostStore.Tail(ctx, sid) }).
			WithTimeout(podDone).WithPolling(poll).Should(And(HaveField("Turn", int64(1)), HaveField("TurnOpen", true)))
		out := kubeOK("plan", "on", "review", "-n", agentNS)
		Expect(out).NotTo(BeEmpty())
		Eventually(func() bool { return getSession("review").Status.PlanMode.Active }).
			WithTimeout(settle).WithPolling(poll).Should(BeTrue())
		status := kubeOK("plan", "status", "review", "-n", agentNS)
		Expect(strings.ToLower(status)).To(ContainSubstring("plan"))

		By("the agent presents its plan: a review is pending")
		Eventually(func() *agentsv1alpha1.ReviewStatus { return getSession("review").Status.Review }).
			WithTimeout(podDone).WithPolling(poll).Should(HaveField("Phase", agentsv1alpha1.ReviewPending))
		Expect(kubeOK("plan", "review", "review", "-n", agentNS)).To(ContainSubstring("Migration plan"))

		By("an editor without the approve verb on agentsessions/review is refused")
		editor := tokenKubeconfig("planmode-cluster-editor", "planmode-agentsession-editor-role")
		out, err := kubeWith(editor, "plan", "approve", "review", "-n", agentNS)
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("approve"))
		Expect(getSession("review").Spec.Review).To(BeNil(), "the refused approval changed nothing")

		By("a reviewer approves with kubectl plan approve and its own token")
		reviewer := tokenKubeconfig("planmode-cluster-reviewer", "planmode-agentsession-reviewer-role")
		out, err = kubeWith(reviewer, "plan", "approve", "review", "-n", agentNS)
		Expect(err).NotTo(HaveOccurred(), out)

		log := waitPodSucceeded(pod)
		boundaries = append(boundaries, boundaryLatencies(log)...)
		Eventually(func(g Gomega) {
			s := getSession("review")
			g.Expect(s.Status.Review).To(HaveField("Phase", agentsv1alpha1.ReviewApproved))
			g.Expect(s.Status.PlanMode.Active).To(BeFalse(), "an approved plan leaves plan mode")
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
		s := getSession("review")
		Expect(must(invariant.CheckStore(ctx, hostStore, sid, nil, invariant.FinalFrom(s)))).To(BeEmpty())

		By("kubectl plan off is accepted and leaves the session off")
		kubeOK("plan", "off", "review", "-n", agentNS)
		Eventually(func() bool { return getSession("review").Status.PlanMode.Active }).
			WithTimeout(settle).WithPolling(poll).Should(BeFalse())
	})

	It("runs the real harness (dsh with agents/dsh-plugin) as an agent pod: kubectl plan message starts a turn, its events land in the PostgreSQL log", func() {
		By("serving a scripted model on the cluster's node address " + nodeIP)
		model, err := chatmodel.NewOn(net.JoinHostPort(nodeIP, "0"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(model.Close)
		model.Fallback(func(int, chatmodel.Seen) chatmodel.Reply { return chatmodel.Reply{Text: dshAnswer} })

		sid := newSession("dsh", "planmode-agent-dsh", nil)
		pod := dshAgentPod("dsh", "planmode-agent-dsh", model.URL())
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				fmt.Fprintf(GinkgoWriter, "---- %s ----\n%s\n", pod.Name, podLog(pod))
			}
			_ = k8s.Delete(ctx, pod, client.GracePeriodSeconds(0))
		})
		By("the harness starts in the pod, as uid 65532 under Pod Security restricted, and reports ready")
		Eventually(func(g Gomega) {
			var p corev1.Pod
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				StopTrying("the harness exited").Wrap(fmt.Errorf("%s", podLog(pod))).Now()
			}
			g.Expect(podLog(pod)).To(ContainSubstring(`"op":"ready"`))
		}).WithTimeout(podDone).WithPolling(time.Second).Should(Succeed())

		for _, pid := range containerPIDs(agentNS, pod.Name) {
			status := string(must(os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))))
			Expect(status).To(MatchRegexp(`(?m)^Uid:\s+65532\s+65532\s+65532\s+65532$`), "the harness runs as the image's user 65532")
		}

		By("kubectl plan message starts a turn; the model answers through the bridge")
		const msg = "look at the repository and plan a change (in-cluster)"
		kubeOK("plan", "message", "dsh", msg, "-n", agentNS)
		Eventually(func(g Gomega) {
			t, err := hostStore.Tail(ctx, sid)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(t.Turn).To(BeNumerically(">=", 1))
			g.Expect(t.TurnOpen).To(BeFalse())
		}).WithTimeout(podDone).WithPolling(poll).Should(Succeed())
		reqs := model.Requests()
		Expect(reqs).NotTo(BeEmpty(), "the harness never called the model")
		Expect(reqs[0].System).To(ContainSubstring("Read, think and propose a plan; do not edit files."),
			"the first request carries plan:policy with the namespace's PlanModeConfig section")
		Expect(reqs[0].Tools).To(ContainElement("exit_plan_mode"))

		By("the log holds the plugin's events for the turn, and the invariants hold")
		evs := must(hostStore.ReadFrom(ctx, sid, 0, 0))
		types := make([]string, 0, len(evs))
		answered, asked := false, false
		for _, e := range evs {
			types = append(types, e.Type)
			asked = asked || (e.Type == "user/message" && strings.Contains(string(e.Data), msg))
			answered = answered || strings.Contains(string(e.Data), dshAnswer)
		}
		Expect(types).To(ContainElements("plan/mode", "turn/start", "user/message", "step/start", "turn/end"))
		Expect(asked).To(BeTrue(), "the user's message is in the log: %v", types)
		Expect(answered).To(BeTrue(), "the model's answer is in the log: %v", types)
		s := getSession("dsh")
		Expect(s.Status.PlanMode.Active).To(BeTrue(), "kubectl plan message turned plan mode on")
		Expect(s.Status.Agent).NotTo(BeNil(), "the plugin reported through the status subresource with its own token")
		Expect(must(invariant.CheckStore(ctx, hostStore, sid, nil, invariant.FinalFrom(s)))).To(BeEmpty(), "invariant violations in session %s", sid)
	})

	It("holds the status-ownership and agent-binding rules with real service-account tokens", func() {
		newSession("owned", "planmode-agent-owned", nil)
		Eventually(func() int64 { return getSession("owned").Status.ObservedGeneration }).
			WithTimeout(settle).WithPolling(poll).Should(BeNumerically(">", 0))
		agent := tokenClient(agentNS, "planmode-agent-owned")
		other := tokenClient(agentNS, "planmode-agent-turns") // an agent, but bound to another session

		By("the session's agent may not write the manager's part of the status")
		err := agent.SubResource("status").Patch(ctx, sessionRef("owned"),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"planMode":{"active":true}}}`)))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(err.Error()).To(ContainSubstring("status.planMode"))
		Expect(err.Error()).To(ContainSubstring("only the manager"))

		By("an agent may not change spec")
		err = agent.Patch(ctx, sessionRef("owned"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"planMode":{"active":true}}}`)))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)

		By("another agent's service account may not write this session's status.agent")
		err = other.SubResource("status").Patch(ctx, sessionRef("owned"),
			client.RawPatch(types.MergePatchType, []byte(`{"status":{"agent":{"steerID":"not-delivered"}}}`)))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.agent.serviceAccountName"))

		By("the installed webhook requires each session to name its agent, one session per agent service account")
		unbound := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "unbound"},
			Spec: agentsv1alpha1.AgentSessionSpec{SessionID: fmt.Sprintf("cluster-unbound-%d", time.Now().UnixNano())}}
		err = k8s.Create(ctx, unbound)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.agent: Required value"))
		twin := unbound.DeepCopy()
		twin.Name, twin.Spec.Agent = "owned-twin", &agentsv1alpha1.AgentBinding{ServiceAccountName: "planmode-agent-owned"}
		Eventually(func(g Gomega) {
			err := k8s.Create(ctx, twin.DeepCopy(), client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(`spec.agent.serviceAccountName: Invalid value: "planmode-agent-owned": is already the agent of AgentSession "owned"`))
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())

		s := getSession("owned")
		Expect(s.Status.PlanMode.Active).To(BeFalse(), "the refused writes changed nothing")
		Expect(s.Spec.PlanMode.Active).To(BeNil())
	})

	It("serves metrics in-cluster over HTTPS: 200 with an authorized token, 403 with an unauthorized one, 401 without", func() {
		url := fmt.Sprintf("https://%s.%s.svc:8443/metrics", metricsService, systemNS)
		for _, sa := range []string{"metrics-reader", "metrics-nobody"} {
			Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: sa}})).To(Succeed())
		}
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "planmode-cluster-test-metrics"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "planmode-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNS, Name: "metrics-reader"}},
		})).To(Succeed())

		// RBAC caches settle within moments; the authorized probe is retried until it gets in.
		Eventually(func(g Gomega) {
			out := waitPodSucceeded(probePod("metrics-authorized", "metrics-reader", "-token", url))
			g.Expect(out).To(ContainSubstring("STATUS 200"))
			g.Expect(out).To(ContainSubstring("controller_runtime_reconcile_total"))
		}).WithTimeout(2 * podDone).WithPolling(time.Second).Should(Succeed())
		Expect(waitPodSucceeded(probePod("metrics-unauthorized", "metrics-nobody", "-token", url))).To(ContainSubstring("STATUS 403"))
		Expect(waitPodSucceeded(probePod("metrics-anonymous", "metrics-nobody", url))).To(ContainSubstring("STATUS 401"))
	})

	It("reports the manager's memory and the boundary acknowledgement latency in-cluster", func() {
		Expect(boundaries).NotTo(BeEmpty(), "the agent pods reported no acknowledged boundary")
		sort.Slice(boundaries, func(i, j int) bool { return boundaries[i] < boundaries[j] })
		p50 := boundaries[len(boundaries)/2]
		p99 := boundaries[min(len(boundaries)-1, len(boundaries)*99/100)]
		ws := managerWorkingSets()
		Expect(ws).To(HaveLen(2))
		for _, m := range ws {
			Expect(m.workingSet).To(BeNumerically(">", 0))
			Expect(m.rss).To(BeNumerically(">", 0))
		}
		report := fmt.Sprintf("in-cluster figures: boundary ack latency p50 %s, p99 %s (%d boundaries, PostgreSQL log on the host); manager replicas: %s",
			p50.Round(100*time.Microsecond), p99.Round(100*time.Microsecond), len(boundaries), mibList(ws))
		AddReportEntry("in-cluster figures", report)
		fmt.Fprintln(GinkgoWriter, report)
	})

	It("hands the leader lease to the other replica once it expires when the leader hangs without releasing it", func() {
		leader, survivor, duration := leaderAndSurvivor()
		pids := containerPIDs(systemNS, leader)
		Expect(pids).NotTo(BeEmpty())

		By("freezing the leader's process with SIGSTOP: it neither renews nor releases the lease")
		trace := newLeaseTrace()
		trace.holderPod()
		frozen := time.Now()
		for _, pid := range pids {
			Expect(syscall.Kill(pid, syscall.SIGSTOP)).To(Succeed())
		}
		trace.note("the leader's process frozen")
		resume := func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
		DeferCleanup(resume)
		var took time.Duration
		// The bound is the Eventually's timeout: a lease left to expire goes within its duration
		// and two looks of its last renewal, which came before the freeze.
		Eventually(func() string {
			took = time.Since(frozen)
			return trace.holderPod()
		}).WithTimeout(duration+takeoverSlack).WithPolling(100*time.Millisecond).Should(Equal(survivor), "the lease as seen:\n%s", trace)
		report := fmt.Sprintf("lease taken over by the survivor %s after the leader froze (lease duration %s); the lease as seen:\n%s",
			fmtDuration(took), duration, trace)
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("leader takeover, frozen leader", report)

		// The frozen replica still looks Ready until its probes time out, so admission calls the
		// Service routes to it hang: resume it before writing through the webhook again.
		By("the old leader, resumed, sees the lease lost and restarts as a candidate")
		resume()
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerDeploy}, &d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		waitWebhookServing()

		By("the new leader reconciles: a toggle commits")
		newSession("after-freeze", "planmode-agent-freeze", ptr(true))
		Eventually(func() bool { return getSession("after-freeze").Status.PlanMode.Active }).
			WithTimeout(settle).WithPolling(poll).Should(BeTrue())
		Expect(holderPod()).To(Equal(survivor), "the resumed replica did not take the lease back")
	})

	It("hands the leader lease to the other replica when the leader pod is deleted: released at its SIGTERM, not left to expire", func() {
		leader, survivor, duration := leaderAndSurvivor()
		By("cordoning the node, so the survivor, not a replacement pod, is the one to take over")
		var nodes corev1.NodeList
		Expect(k8s.List(ctx, &nodes)).To(Succeed())
		Expect(nodes.Items).To(HaveLen(1))
		node := nodes.Items[0].Name
		kubeOK("cordon", node)
		DeferCleanup(func() { _, _ = kube("uncordon", node) })

		pids := containerPIDs(systemNS, leader)
		Expect(pids).NotTo(BeEmpty())
		By("deleting the leader pod " + leader + " with no grace period")
		trace := newLeaseTrace()
		trace.holderPod()
		killed := time.Now()
		Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: leader}},
			client.GracePeriodSeconds(0))).To(Succeed())
		trace.note("the leader pod deleted")
		// The API object goes at once; the process ends when the kubelet stops the container
		// (SIGTERM, then SIGKILL after the pod's terminationGracePeriodSeconds). Until then it is
		// a live leader and keeps its lease, so the takeover is measured from the process's end.
		var took time.Duration
		var taken, exited time.Time
		Eventually(func() string {
			now := time.Now()
			took = now.Sub(killed)
			if exited.IsZero() && !anyAlive(pids) {
				exited = now
				trace.note("the leader's process ended")
			}
			taken = now
			return trace.holderPod()
		}).WithTimeout(managerTerminationGrace+duration+takeoverSlack).WithPolling(100*time.Millisecond).Should(Equal(survivor), "the lease as seen:\n%s", trace)
		report := fmt.Sprintf("lease taken over by the survivor %s after the leader pod was deleted (lease duration %s); the lease as seen:\n%s",
			fmtDuration(took), duration, trace)
		fmt.Fprintln(GinkgoWriter, report)
		AddReportEntry("leader takeover, deleted pod", report)
		// A pod deleted with no grace period is killed two seconds after its SIGTERM. The leader
		// releases the lease at the signal (LeaderElectionReleaseOnCancel, not waiting for the
		// webhook drain), and the survivor takes it at its next look: before the lease could have
		// expired, which a lease left to expire would not allow.
		renewed := trace.lastRenewal(leader)
		Expect(renewed.IsZero()).To(BeFalse(), "the test saw no renewal by the leader:\n%s", trace)
		Expect(taken.Before(renewed.Add(duration))).To(BeTrue(),
			"the survivor took the lease %s after the leader's last renewal, not before the lease's %s ran out: the leader did not release it. The lease as seen:\n%s",
			fmtDuration(taken.Sub(renewed)), duration, trace)

		kubeOK("uncordon", node)
		By("the new leader reconciles: a toggle commits")
		newSession("after-failover", "planmode-agent-failover", ptr(true))
		Eventually(func() bool { return getSession("after-failover").Status.PlanMode.Active }).
			WithTimeout(settle).WithPolling(poll).Should(BeTrue())
		kubeOK("rollout", "status", "deployment/"+managerDeploy, "-n", systemNS, "--timeout=180s")
		waitWebhookServing()
	})

	It("runs on the SQLite log on a volume with one replica (the single-node setup)", func() {
		dir := filepath.Join(clusterDir, "volumes", "sqlite-log")
		Expect(os.RemoveAll(dir)).To(Succeed())
		Expect(os.MkdirAll(dir, 0o700)).To(Succeed())
		Expect(os.Chown(dir, 65532, 65532)).To(Succeed(), "the images run as 65532")
		const dbURL = "sqlite:///var/lib/planmode/sessions.db"

		By("one hostPath PersistentVolume per namespace onto the same directory, claimed by the manager and the agent")
		for _, ns := range []string{systemNS, agentNS} {
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "planmode-sqlite-" + ns},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              "",
					PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr(corev1.HostPathDirectory)}},
					ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "planmode-sqlite"},
				},
			}
			_ = k8s.Delete(ctx, pv)
			Eventually(func() error { return k8s.Create(ctx, pv.DeepCopy()) }).WithTimeout(settle).WithPolling(poll).Should(Succeed())
			DeferCleanup(func() { _ = k8s.Delete(ctx, pv) })
			Expect(k8s.Create(ctx, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planmode-sqlite"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr(""),
					VolumeName:       pv.Name,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			})).To(Succeed())
		}

		By("the manager moves to the SQLite log with one replica")
		Expect(k8s.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: storeSecret}},
			client.RawPatch(types.MergePatchType, must(json.Marshal(map[string]any{"stringData": map[string]string{"url": dbURL}}))))).To(Succeed())
		Expect(k8s.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: storeSecret}},
			client.RawPatch(types.MergePatchType, must(json.Marshal(map[string]any{"stringData": map[string]string{"url": dbURL}}))))).To(Succeed())
		patch := `{"spec":{"replicas":1,"template":{"spec":{` +
			`"volumes":[{"name":"sqlite-log","persistentVolumeClaim":{"claimName":"planmode-sqlite"}}],` +
			`"containers":[{"name":"manager","volumeMounts":[{"name":"sqlite-log","mountPath":"/var/lib/planmode"}]}]}}}}`
		Expect(k8s.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: managerDeploy}},
			client.RawPatch(types.StrategicMergePatchType, []byte(patch)))).To(Succeed())
		kubeOK("rollout", "status", "deployment/"+managerDeploy, "-n", systemNS, "--timeout=180s")
		waitWebhookServing()

		By("an agent pod with the same volume runs its turns; the manager answers from the same file")
		sid := newSession("sqlite", "planmode-agent-sqlite", nil)
		pod := agentPod("sqlite", "planmode-agent-sqlite", nil, "--turns", "2", "--steps", "2", "--step-delay", "100ms")
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "sqlite-log",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "planmode-sqlite"}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: "sqlite-log", MountPath: "/var/lib/planmode"})
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		patchSession("sqlite", true)
		out := waitPodSucceeded(pod)
		Expect(out).To(ContainSubstring("2 turns, 4 steps"))
		Eventually(func() bool { return getSession("sqlite").Status.PlanMode.Active }).
			WithTimeout(settle).WithPolling(poll).Should(BeTrue())

		db := filepath.Join(dir, "sessions.db")
		Expect(db).To(BeAnExistingFile())
		store := must(sessionlog.OpenReadOnly(ctx, "sqlite://"+db))
		defer func() { _ = store.Close() }()
		t := must(store.Tail(ctx, sid))
		Expect(t.Turn).To(Equal(int64(2)))
		Expect(t.Active).To(BeTrue(), "the manager appended the plan/mode to the shared file")
	})
})

// newSession creates an AgentSession bound to its own agent ServiceAccount (created with the
// agent role bound), and returns its session id.
func newSession(name, sa string, active *bool) string {
	GinkgoHelper()
	ensureServiceAccount(sa, "planmode-agentsession-agent-role")
	s := &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: name},
		Spec: agentsv1alpha1.AgentSessionSpec{
			SessionID: fmt.Sprintf("cluster-%s-%d", name, time.Now().UnixNano()),
			Agent:     &agentsv1alpha1.AgentBinding{ServiceAccountName: sa},
		},
	}
	s.Spec.PlanMode.Active = active
	Expect(k8s.Create(ctx, s)).To(Succeed())
	return s.Spec.SessionID
}

func sessionRef(name string) *agentsv1alpha1.AgentSession {
	return &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: name}}
}

func getSession(name string) *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	var s agentsv1alpha1.AgentSession
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: name}, &s)).To(Succeed())
	return &s
}

func patchSession(name string, active bool) {
	GinkgoHelper()
	Expect(k8s.Patch(ctx, sessionRef(name), client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"spec":{"planMode":{"active":%v}}}`, active)))).To(Succeed())
}

// ensureServiceAccount creates a ServiceAccount in the agents' namespace with a ClusterRole
// bound to it there.
func ensureServiceAccount(sa, clusterRole string) {
	GinkgoHelper()
	err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: sa}})
	if apierrors.IsAlreadyExists(err) {
		return
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNS, Name: sa}},
	})).To(Succeed())
}

// restricted is the container security context Pod Security restricted asks for.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(true),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// agentPod makes a reference-agent pod (created by the caller) for session
// name, running as sa, with the log-store URL from the namespace's Secret; script, when set,
// goes through a ConfigMap.
func agentPod(name, sa string, script *string, args ...string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "agent-" + name},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			SecurityContext:    podSecurity(),
			Containers: []corev1.Container{{
				Name: "agent", Image: images["REFAGENT_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
				Args: append([]string{"--namespace", agentNS, "--name", name, "--boundary-timeout", "45s"}, args...),
				Env: []corev1.EnvVar{{Name: storeenv.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: storeSecret}, Key: "url"}}}},
				SecurityContext: restricted(),
			}},
		},
	}
	if script != nil {
		Expect(k8s.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "script-" + name},
			Data:       map[string]string{"script.txt": *script},
		})).To(Succeed())
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "script", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "script-" + name}}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "script", MountPath: "/script"})
		pod.Spec.Containers[0].Args = append(pod.Spec.Containers[0].Args, "--script", "/script/script.txt")
	}
	return pod
}

// dshAgentPod makes a pod (created by the caller) running the real harness with the project's
// plugin (the image hack/cluster/images.sh builds) as the agent of session name, as sa, on the
// log store from the namespace's Secret and the model at modelURL. The root file system is read
// only: the harness's home, its working directory and /tmp are empty volumes.
func dshAgentPod(name, sa, modelURL string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "dsh-agent-" + name},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			SecurityContext:    podSecurity(),
			Containers: []corev1.Container{{
				Name: "dsh", Image: images["DSH_AGENT_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
				Env: []corev1.EnvVar{
					{Name: "PLANMODE_SESSION", Value: agentNS + "/" + name},
					{Name: storeenv.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: storeSecret}, Key: "url"}}},
					{Name: "DEEPSEEK_API_KEY", Value: "sk-scripted"},
					{Name: "DEEPSEEK_BASE_URL", Value: modelURL},
				},
				SecurityContext: restricted(),
			}},
		},
	}
	for _, m := range []struct{ volume, path string }{{"home", "/home/nonroot"}, {"workspace", "/workspace"}, {"tmp", "/tmp"}} {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: m.volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: m.volume, MountPath: m.path})
	}
	return pod
}

// probePod creates a probe pod: one HTTPS GET, printing the status.
func probePod(name, sa string, args ...string) *corev1.Pod {
	GinkgoHelper()
	_ = k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: name}}, client.GracePeriodSeconds(0))
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: name}, &corev1.Pod{}))
	}).WithTimeout(settle).WithPolling(poll).Should(BeTrue())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa,
			RestartPolicy:      corev1.RestartPolicyNever,
			SecurityContext:    podSecurity(),
			Containers: []corev1.Container{{
				Name: "probe", Image: images["PROBE_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
				Args: args, SecurityContext: restricted(),
			}},
		},
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	return pod
}

// waitPodSucceeded waits for the pod to end and returns its log; a failed pod fails the spec
// with its log.
func waitPodSucceeded(pod *corev1.Pod) string {
	GinkgoHelper()
	var phase corev1.PodPhase
	Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), &p)).To(Succeed())
		phase = p.Status.Phase
		g.Expect(phase).To(BeElementOf(corev1.PodSucceeded, corev1.PodFailed))
	}).WithTimeout(podDone).WithPolling(poll).Should(Succeed(), "pod %s/%s did not finish:\n%s", pod.Namespace, pod.Name, podLog(pod))
	out := podLog(pod)
	Expect(phase).To(Equal(corev1.PodSucceeded), "pod %s/%s failed:\n%s", pod.Namespace, pod.Name, out)
	return out
}

func podLog(pod *corev1.Pod) string {
	b, err := clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

var boundaryRE = regexp.MustCompile(`asked=true unanswered=false boundary=(\S+)`)

// boundaryLatencies reads the acknowledged boundaries' latencies from a reference agent's output.
func boundaryLatencies(out string) []time.Duration {
	GinkgoHelper()
	ms := boundaryRE.FindAllStringSubmatch(out, -1)
	ds := make([]time.Duration, 0, len(ms))
	for _, m := range ms {
		ds = append(ds, must(time.ParseDuration(m[1])))
	}
	return ds
}

// tokenKubeconfig writes a kubeconfig with a fresh token of a ServiceAccount in the agents'
// namespace that has clusterRole bound there.
func tokenKubeconfig(sa, clusterRole string) string {
	GinkgoHelper()
	ensureServiceAccount(sa, clusterRole)
	tok := token(agentNS, sa)
	path := filepath.Join(workDir, sa+".kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: %s}}]
current-context: c
`, restCfg.Host, base64.StdEncoding.EncodeToString(caData()), tok, agentNS)
	Expect(os.WriteFile(path, []byte(kc), 0o600)).To(Succeed())
	return path
}

// tokenClient is a client authenticated with a fresh token of the ServiceAccount.
func tokenClient(ns, sa string) client.Client {
	GinkgoHelper()
	cfg := rest.AnonymousClientConfig(restCfg)
	cfg.BearerToken = token(ns, sa)
	return must(client.New(cfg, client.Options{Scheme: scheme}))
}

func token(ns, sa string) string {
	GinkgoHelper()
	tr := must(clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))},
	}, metav1.CreateOptions{}))
	return tr.Status.Token
}

func caData() []byte {
	GinkgoHelper()
	if len(restCfg.CAData) > 0 {
		return restCfg.CAData
	}
	return must(os.ReadFile(restCfg.CAFile))
}

func managerPods() []corev1.Pod {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(systemNS), client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// leaderAndSurvivor names the manager pod holding the lease and the other one, and the lease
// duration.
func leaderAndSurvivor() (leader, survivor string, duration time.Duration) {
	GinkgoHelper()
	var lease coordinationv1.Lease
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: leaseName}, &lease)).To(Succeed())
	Expect(lease.Spec.LeaseDurationSeconds).NotTo(BeNil())
	duration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	leader = holderPod()
	pods := managerPods()
	Expect(pods).To(HaveLen(2))
	for _, p := range pods {
		if p.Name != leader {
			survivor = p.Name
		}
	}
	Expect([]string{pods[0].Name, pods[1].Name}).To(ContainElement(leader), "the lease holder is one of the manager pods")
	return leader, survivor, duration
}

// anyAlive reports whether any of the host PIDs is still a running process.
func anyAlive(pids []int) bool {
	return slices.ContainsFunc(pids, framework.ProcessRunning)
}

// holderPod is the pod name in the lease's holder identity (controller-runtime: hostname_uuid).
func holderPod() string {
	h, _, _ := strings.Cut(leaseHolder(), "_")
	return h
}

// leaseTrace records each state of the leader lease a takeover test sees, and the events the
// test notes, with when it saw them: a slow takeover then says whether the old leader released
// the lease, when it last renewed it, and how long the survivor took after that.
type leaseTrace struct {
	start time.Time
	last  string
	lines []string
	// renewed is the last renewal time seen per holder pod.
	renewed map[string]time.Time
}

func newLeaseTrace() *leaseTrace {
	return &leaseTrace{start: time.Now(), renewed: map[string]time.Time{}}
}

// lastRenewal is the last renewal by pod the trace saw (zero when none).
func (t *leaseTrace) lastRenewal(pod string) time.Time { return t.renewed[pod] }

// holderPod reads the lease, records its state when it changed, and returns its holder's pod.
func (t *leaseTrace) holderPod() string {
	var lease coordinationv1.Lease
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: leaseName}, &lease); err != nil {
		t.note("lease read failed: " + err.Error())
		return ""
	}
	s := lease.Spec
	holder := utilptr.Deref(s.HolderIdentity, "")
	renewed := "never"
	if s.RenewTime != nil {
		renewed = t.at(s.RenewTime.Time)
	}
	t.note(fmt.Sprintf("holder %q, renewed at %s, duration %ds, transitions %d",
		holder, renewed, utilptr.Deref(s.LeaseDurationSeconds, 0), utilptr.Deref(s.LeaseTransitions, 0)))
	h, _, _ := strings.Cut(holder, "_")
	if h != "" && s.RenewTime != nil {
		t.renewed[h] = s.RenewTime.Time
	}
	return h
}

// note records what, when it differs from the last thing recorded.
func (t *leaseTrace) note(what string) {
	if what == t.last {
		return
	}
	t.last = what
	t.lines = append(t.lines, t.at(time.Now())+" "+what)
}

// at is a time relative to the trace's start.
func (t *leaseTrace) at(when time.Time) string {
	return fmt.Sprintf("%+.2fs", when.Sub(t.start).Seconds())
}

func (t *leaseTrace) String() string { return strings.Join(t.lines, "\n") }

// containerPIDs are the host PIDs of the pod's first container, from its cgroup (the kubelet's
// cgroupfs driver: kubepods[/qos]/pod<uid>/<container id>).
func containerPIDs(namespace, podName string) []int {
	GinkgoHelper()
	var pod corev1.Pod
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: podName}, &pod)).To(Succeed())
	Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty())
	_, cid, ok := strings.Cut(pod.Status.ContainerStatuses[0].ContainerID, "://")
	Expect(ok).To(BeTrue())
	patterns := []string{
		"/sys/fs/cgroup/pids/kubepods/*/pod%s/%s/cgroup.procs", "/sys/fs/cgroup/pids/kubepods/pod%s/%s/cgroup.procs",
		"/sys/fs/cgroup/kubepods/*/pod%s/%s/cgroup.procs", "/sys/fs/cgroup/kubepods/pod%s/%s/cgroup.procs",
	}
	files := make([]string, 0, len(patterns))
	for _, pattern := range patterns {
		files = append(files, must(filepath.Glob(fmt.Sprintf(pattern, pod.UID, cid)))...)
	}
	Expect(files).NotTo(BeEmpty(), "no cgroup for container %s of pod %s", cid, podName)
	fields := strings.Fields(string(must(os.ReadFile(files[0]))))
	pids := make([]int, 0, len(fields))
	for _, f := range fields {
		pids = append(pids, must(strconv.Atoi(f)))
	}
	return pids
}

// waitWebhookServing waits, after a rollout, until the old manager pods are gone and the
// webhook Service answers several dry-run creates in a row. A terminating manager stops serving
// at SIGTERM, a moment before kube-proxy drops its endpoint: calls routed to it meanwhile are
// refused (failurePolicy Fail makes that the user's write failing).
func waitWebhookServing() {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8s.List(ctx, &pods, client.InNamespace(systemNS), client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.DeletionTimestamp).To(BeNil(), "pod %s is terminating", p.Name)
		}
	}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
	ok := 0
	var lastErr error
	Eventually(func() int {
		err := k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "webhook-serving"},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: "serving"},
		}, client.DryRunAll)
		if err != nil {
			ok, lastErr = 0, err
		} else {
			ok++
		}
		return ok
	}).WithTimeout(settle).WithPolling(poll).Should(BeNumerically(">=", 10), func() string {
		return fmt.Sprintf("dry-run creates in a row through the webhook; the last refused: %v", lastErr)
	})
}

func leaseHolder() string {
	var lease coordinationv1.Lease
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: leaseName}, &lease); err != nil || lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) corev1.ConditionStatus {
	for _, c := range d.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// memory is a container's memory as the kubelet's summary API reports it (cgroup figures).
type memory struct{ workingSet, rss uint64 }

// managerWorkingSets reads each manager container's memory from the kubelet's summary API
// (through the API server's node proxy).
func managerWorkingSets() []memory {
	GinkgoHelper()
	var nodes corev1.NodeList
	Expect(k8s.List(ctx, &nodes)).To(Succeed())
	Expect(nodes.Items).To(HaveLen(1))
	raw := must(clientset.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodes.Items[0].Name, "proxy", "stats", "summary").DoRaw(ctx))
	var summary struct {
		Pods []struct {
			PodRef     struct{ Namespace, Name string } `json:"podRef"`
			Containers []struct {
				Name   string `json:"name"`
				Memory struct {
					WorkingSetBytes *uint64 `json:"workingSetBytes"`
					RSSBytes        *uint64 `json:"rssBytes"`
				} `json:"memory"`
			} `json:"containers"`
		} `json:"pods"`
	}
	Expect(json.Unmarshal(raw, &summary)).To(Succeed())
	pods := managerPods()
	live := make([]string, 0, len(pods))
	for _, p := range pods {
		live = append(live, p.Name)
	}
	var ws []memory
	for _, p := range summary.Pods {
		if p.PodRef.Namespace != systemNS || !slices.Contains(live, p.PodRef.Name) {
			continue
		}
		for _, c := range p.Containers {
			if c.Name == "manager" && c.Memory.WorkingSetBytes != nil && c.Memory.RSSBytes != nil {
				ws = append(ws, memory{workingSet: *c.Memory.WorkingSetBytes, rss: *c.Memory.RSSBytes})
			}
		}
	}
	return ws
}

func mibList(ms []memory) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("working set %.1f MiB, RSS %.1f MiB", float64(m.workingSet)/(1<<20), float64(m.rss)/(1<<20)))
	}
	return strings.Join(parts, "; ")
}

func dumpManagerLogs() {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(systemNS)); err != nil {
		return
	}
	for i := range pods.Items {
		fmt.Fprintf(GinkgoWriter, "---- %s ----\n%s\n", pods.Items[i].Name, podLog(&pods.Items[i]))
	}
	if out, err := kube("get", "events", "-A", "--sort-by=.lastTimestamp"); err == nil {
		fmt.Fprintf(GinkgoWriter, "---- events ----\n%s\n", out)
	}
}
