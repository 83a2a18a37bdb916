package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

const (
	poll = 50 * time.Millisecond
	// settle bounds anything the manager does after an API or log change (a reconcile, or
	// the pending poll of 200ms) on a loaded 2-core machine.
	settle = 30 * time.Second
)

var _ = Describe("on the SQLite log (events on)", Ordered, func() {
	backendSpecs("sqlite", func() string { return "sqlite://" + filepath.Join(workDir, "sessions.db") }, true)
})

var _ = Describe("on the PostgreSQL log (events off)", Ordered, func() {
	backendSpecs("postgres", func() string { return pg.URL }, false)
})

// backendSpecs is the end-to-end story on one log backend, against one manager process (killed
// and replaced in the last spec).
func backendSpecs(backend string, storeURL func() string, events bool) {
	var (
		ns    string
		mgr   *manager
		store sessionlog.Store
	)

	BeforeAll(func() {
		ns = "e2e-" + backend
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: "## Plan mode\nRead, think and propose a plan; do not edit files.\n"},
		})).To(Succeed())
		mgr = startManager("manager-"+backend+"-1", storeURL(), events)
		var err error
		store, err = sessionlog.Open(ctx, storeURL())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(store.Close)
	})

	newSession := func(name string, active *bool) string {
		GinkgoHelper()
		s := &agentsv1alpha1.AgentSession{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: fmt.Sprintf("e2e-%s-%s-%d", backend, name, time.Now().UnixNano())},
		}
		s.Spec.PlanMode.Active = active
		Expect(k8s.Create(ctx, s)).To(Succeed())
		return s.Spec.SessionID
	}
	get := func(name string) *agentsv1alpha1.AgentSession {
		GinkgoHelper()
		var s agentsv1alpha1.AgentSession
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		return &s
	}
	tail := func(sid string) func() harness.Tail {
		return func() harness.Tail {
			t, err := store.Tail(ctx, sid)
			Expect(err).NotTo(HaveOccurred())
			return t
		}
	}
	agent := func(name string, args ...string) *proc {
		GinkgoHelper()
		return startProc("refagent-"+backend+"-"+name, nil, filepath.Join(binDir, "refagent"),
			append([]string{"--namespace", ns, "--name", name, "--store", storeURL(), "--boundary-timeout", "45s"}, args...)...)
	}
	patch := func(name string, active bool) {
		GinkgoHelper()
		out, err := kube("patch", "agentsession", name, "-n", ns, "--type", "merge",
			"-p", fmt.Sprintf(`{"spec":{"planMode":{"active":%v}}}`, active))
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("agentsession.agents.harness.dev/%s patched", name))
	}
	// checkLog runs the invariant checker over the whole log and the final state.
	checkLog := func(name, sid string) []harness.Event {
		GinkgoHelper()
		s := get(name)
		v, err := invariant.CheckStore(ctx, store, sid, nil, invariant.FinalFrom(s))
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(BeEmpty(), "invariant violations in session %s", sid)
		evs, err := store.ReadFrom(ctx, sid, 0, 0)
		Expect(err).NotTo(HaveOccurred())
		return evs
	}
	settled := func(name string, active bool) {
		GinkgoHelper()
		Eventually(func(g Gomega) {
			s := get(name)
			g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
			g.Expect(s.Status.PlanMode.Active).To(Equal(active))
			g.Expect(s.Status.PlanMode.Pending).To(BeFalse())
			if sel := s.Spec.PlanMode.Active; sel != nil {
				g.Expect(s.Status.PlanMode.Selection).To(Equal(sel))
			}
			ready := meta.FindStatusCondition(s.Status.Conditions, agentsv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
	}

	It("commits a toggle made during a long step at the next step boundary, with exactly one notice", func() {
		sid := newSession("toggle", nil)
		settled("toggle", false)
		a := agent("toggle", "--turns", "1", "--steps", "3", "--step-delay", "2500ms")

		By("waiting until the agent is inside step 1 of turn 1")
		Eventually(tail(sid)).WithTimeout(settle).WithPolling(poll).Should(
			And(HaveField("TurnOpen", true), HaveField("StepOpen", true), HaveField("Step", int64(1))))

		By("kubectl patch spec.planMode.active=true during the step: pending, not committed")
		patch("toggle", true)
		Eventually(func(g Gomega) {
			s := get("toggle")
			g.Expect(s.Status.PlanMode.Pending).To(BeTrue())
			g.Expect(s.Status.PlanMode.Active).To(BeFalse())
			ready := meta.FindStatusCondition(s.Status.Conditions, agentsv1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Reason).To(Equal(agentsv1alpha1.ReasonSelectionPending))
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
		Expect(tail(sid)()).To(HaveField("LastPlanModeSeq", int64(-1)), "nothing is appended during the step")

		By("committed at the next boundary")
		settled("toggle", true)
		out, err := kube("wait", "--for=condition=Ready", "agentsession/toggle", "-n", ns, "--timeout=30s")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("agentsession.agents.harness.dev/toggle condition met"))
		a.waitExit(90 * time.Second)

		evs := checkLog("toggle", sid)
		pms, notices := planModes(evs), planNotices(evs)
		Expect(pms).To(HaveLen(1), "one plan/mode in the log")
		Expect(pms[0].active).To(BeTrue())
		Expect(notices).To(HaveLen(1), "exactly one plan-mode notice in the log")
		Expect(notices[0].text).To(Equal(harness.NoticePlanOn))
		// The plan/mode sits at the boundary: right after step 1's step/end, before step 2.
		at := pms[0].seq
		Expect(evs[at-1].Type).To(Equal("step/end"))
		Expect(stepOf(evs[at-1])).To(Equal(int64(1)))
		Expect(evs[at+1].Type).To(Equal("step/start"))
		Expect(stepOf(evs[at+1])).To(Equal(int64(2)))
		Expect(notices[0].seq).To(BeNumerically(">", at+1), "the notice is recorded in step 2")
		Expect(stepOf(evs[nextOfType(evs, notices[0].seq, "step/end")])).To(Equal(int64(2)))

		By("the metrics count one user transition at a boundary and the pending-to-commit latency")
		Eventually(func() (float64, error) {
			return mgr.metric("planmode_transitions_total", `cause="user_at_boundary"`, `active="true"`)
		}).WithTimeout(settle).WithPolling(poll).Should(BeNumerically(">=", 1))
		Expect(mgr.metric("planmode_boundary_acks_total", `result="Admitted"`, `reason="committed"`)).To(BeNumerically(">=", 1))
		Expect(mgr.metric("planmode_pending_to_commit_seconds_count", `source="user"`)).To(BeNumerically(">=", 1))
		Expect(mgr.metric("planmode_sessions", `active="true"`)).To(BeNumerically(">=", 1))
		Expect(mgr.metric("controller_runtime_reconcile_total", `controller="agentsession"`)).To(BeNumerically(">", 0))

		By("events follow the --events switch")
		list := func() []string {
			var evl eventsv1.EventList
			Expect(k8s.List(ctx, &evl, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range evl.Items {
				if e.Regarding.Name == "toggle" && e.ReportingController == "planmode-manager" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}
		if events {
			Eventually(list).WithTimeout(settle).WithPolling(poll).Should(ContainElement("Committed"))
		} else {
			Consistently(list).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(BeEmpty())
		}
	})

	It("approves a plan with kubectl plan approve: the agent leaves plan mode at its next step, silently", func() {
		sid := newSession("review", ptr(true))
		settled("review", true)
		script := filepath.Join(workDir, backend+"-review.txt")
		Expect(os.WriteFile(script, []byte("turn draft the migration plan\nstep\nexit # Migration plan\\n1. add the column\\n2. backfill\nstep\nend\n"), 0o600)).To(Succeed())
		a := agent("review", "--script", script)

		Eventually(func() *agentsv1alpha1.ReviewStatus { return get("review").Status.Review }).
			WithTimeout(settle).WithPolling(poll).Should(HaveField("Phase", agentsv1alpha1.ReviewPending))
		out, err := kube("plan", "review", "review", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Migration plan"))
		out, err = kube("plan", "approve", "review", "-n", ns)
		Expect(err).NotTo(HaveOccurred(), out)

		a.waitExit(90 * time.Second)
		Expect(get("review").Status.Review).To(HaveField("Phase", agentsv1alpha1.ReviewApproved))
		settled("review", false)

		evs := checkLog("review", sid)
		pms := planModes(evs)
		Expect(pms).To(HaveLen(2))
		Expect([]bool{pms[0].active, pms[1].active}).To(Equal([]bool{true, false}))
		exit := pms[1].seq
		Expect(evs[exit-1].Type).To(Equal("step/end"))
		Expect(evs[exit+1].Type).To(Equal("step/start"))
		for _, n := range planNotices(evs) {
			Expect(n.seq).To(BeNumerically("<", exit), "an approved exit is never narrated")
		}

		Eventually(func() (float64, error) {
			return mgr.metric("planmode_transitions_total", `cause="exit_at_boundary"`)
		}).WithTimeout(settle).WithPolling(poll).Should(BeNumerically(">=", 1))
		Expect(mgr.metric("planmode_reviews_total", `outcome="Approved"`)).To(BeNumerically(">=", 1))
		Expect(mgr.metric("planmode_review_decision_seconds_count", `outcome="Approved"`)).To(BeNumerically(">=", 1))
	})

	It("sends an image with kubectl plan message --image: its bytes in a ConfigMap the session owns, recorded by the agent before the text; off with an image changes nothing", func() {
		sid := newSession("images", nil)
		settled("images", false)
		img := image.NewNRGBA(image.Rect(0, 0, 4, 3))
		img.Set(1, 1, color.NRGBA{G: 255, A: 255})
		var b bytes.Buffer
		Expect(png.Encode(&b, img)).To(Succeed())
		file := filepath.Join(workDir, backend+"-mockup.png")
		Expect(os.WriteFile(file, b.Bytes(), 0o600)).To(Succeed())
		sum := sha256.Sum256(b.Bytes())
		id := "sha256:" + hex.EncodeToString(sum[:])

		By("kubectl plan off --image: refused with the harness's text, nothing written")
		before := get("images")
		out, err := kube("plan", "off", "images", "-n", ns, "--image", file)
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Image attachments cannot accompany kubectl plan off."))
		Expect(get("images").ResourceVersion).To(Equal(before.ResourceVersion))

		By("kubectl plan message --image to an idle agent: it starts a turn and records the image, then the text")
		a := agent("images", "--turns", "1", "--wait-for-messages")
		DeferCleanup(a.kill)
		Eventually(tail(sid)).WithTimeout(settle).WithPolling(poll).Should(And(HaveField("Turn", int64(1)), HaveField("TurnOpen", false)))
		out, err = kube("plan", "message", "images", "-n", ns, "--image", file, "make", "it", "look", "like", "this")
		Expect(err).NotTo(HaveOccurred(), out)
		var cm corev1.ConfigMap
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentsv1alpha1.ImageConfigMapName(id)}, &cm)).To(Succeed())
		Expect(cm.BinaryData[agentsv1alpha1.ImageDataKey]).To(Equal(b.Bytes()))
		Expect(cm.OwnerReferences).To(ConsistOf(HaveField("UID", get("images").UID)))
		var msg harness.Event
		Eventually(func(g Gomega) {
			evs, err := store.ReadFrom(ctx, sid, 0, 0)
			g.Expect(err).NotTo(HaveOccurred())
			found := false
			for _, e := range evs {
				if e.Type == harness.TypeUserMessage && bytes.Contains(e.Data, []byte(`"type":"image"`)) {
					msg, found = e, true
				}
			}
			g.Expect(found).To(BeTrue(), "no user/message with an image in the log")
		}).WithTimeout(settle).WithPolling(poll).Should(Succeed())
		Expect(string(msg.Data)).To(HavePrefix(`{"content":[{"type":"image","attachment":{"attachmentId":"` + id +
			`","mediaType":"image/png","width":4,"height":3,"bytes":` + strconv.Itoa(b.Len()) + `,"name":"` + backend + `-mockup.png"}},` +
			`{"type":"text","text":"make it look like this"}],"source":{"kind":"user"}`))
		settled("images", true)
		Eventually(func() string { return get("images").Status.Agent.SteerID }).WithTimeout(settle).WithPolling(poll).
			Should(Equal(get("images").Spec.SteerQueue[0].ID))
		checkLog("images", sid)
	})

	It("loses and duplicates nothing when the manager is SIGKILLed and restarted mid-run", func() {
		sid := newSession("crash", nil)
		settled("crash", false)
		a := agent("crash", "--turns", "8", "--steps", "3", "--step-delay", "150ms")
		turn := func(n int64) {
			GinkgoHelper()
			Eventually(tail(sid)).WithTimeout(settle).WithPolling(poll).Should(HaveField("Turn", BeNumerically(">=", n)))
		}

		turn(2)
		patch("crash", true)
		turn(3)
		patch("crash", false)
		By("SIGKILL the manager right after a toggle, and toggle again while it is down")
		mgr.kill()
		Expect(mgr.err).To(HaveOccurred(), "killed, not exited cleanly")
		patch("crash", true)
		mgr = startManager("manager-"+backend+"-2", storeURL(), events)
		turn(5)
		patch("crash", false)
		turn(7)
		patch("crash", true)

		a.waitExit(120 * time.Second)
		settled("crash", true)
		evs := checkLog("crash", sid)
		pms := planModes(evs)
		Expect(pms).NotTo(BeEmpty())
		for i := 1; i < len(pms); i++ {
			Expect(pms[i].active).NotTo(Equal(pms[i-1].active), "plan/mode at seq %d repeats the state of seq %d", pms[i].seq, pms[i-1].seq)
		}
		Expect(pms[len(pms)-1].active).To(BeTrue(), "the final selection is committed")
		t := tail(sid)()
		Expect(t.Active).To(BeTrue())
		Expect(t.TurnOpen).To(BeFalse())
		Expect(t.Turn).To(Equal(int64(8)), "the agent ran all its turns")
		GinkgoWriter.Printf("crash run: %d events, %d plan/mode, %d notices\n", len(evs), len(pms), len(planNotices(evs)))
	})
}

func ptr[T any](v T) *T { return &v }

type pmAt struct {
	seq    int64
	active bool
}

func planModes(evs []harness.Event) []pmAt {
	var out []pmAt
	for _, e := range evs {
		if e.Type != "plan/mode" {
			continue
		}
		var d struct {
			Active bool `json:"active"`
		}
		Expect(json.Unmarshal(e.Data, &d)).To(Succeed())
		out = append(out, pmAt{seq: e.Seq, active: d.Active})
	}
	return out
}

type noticeAt struct {
	seq  int64
	text string
}

// planNotices are the plugin-sourced plan-mode notices (user/message from plugin plan-mode).
func planNotices(evs []harness.Event) []noticeAt {
	var out []noticeAt
	for _, e := range evs {
		if e.Type != "user/message" {
			continue
		}
		var d struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			Source struct {
				Kind   string `json:"kind"`
				Plugin string `json:"plugin"`
				Form   string `json:"form"`
			} `json:"source"`
		}
		Expect(json.Unmarshal(e.Data, &d)).To(Succeed())
		if d.Source.Kind == "plugin" && d.Source.Plugin == "plan-mode" && d.Source.Form == "notice" {
			text := ""
			if len(d.Content) > 0 {
				text = d.Content[0].Text
			}
			out = append(out, noticeAt{seq: e.Seq, text: text})
		}
	}
	return out
}

func stepOf(e harness.Event) int64 {
	var d struct {
		Step int64 `json:"step"`
	}
	Expect(json.Unmarshal(e.Data, &d)).To(Succeed())
	return d.Step
}

// nextOfType is the index of the first event of typ at or after seq.
func nextOfType(evs []harness.Event, seq int64, typ string) int {
	for i := int(seq); i < len(evs); i++ {
		if evs[i].Type == typ {
			return i
		}
	}
	Fail(fmt.Sprintf("no %s after seq %d", typ, seq))
	return -1
}
