package refagent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/apicount"
)

const section = "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."

const wait = 20 * time.Second

type env struct {
	ns    string
	store sessionlog.Store
	mgr   *manager
}

type agent struct {
	e        *env
	name, id string
	c        *agentsdk.Client
	api      *apicount.Counter
}

func newEnv(backend string) *env {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "refagent-"}}
	Expect(k8s.Create(suiteCtx, ns)).To(Succeed())
	Expect(k8s.Create(suiteCtx, &v1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: v1alpha1.DefaultPlanModeConfigName},
		Spec:       v1alpha1.PlanModeConfigSpec{Section: section},
	})).To(Succeed())
	e := &env{ns: ns.Name, store: stores[backend]}
	e.mgr = startManager(e.store)
	return e
}

// newAgent creates an AgentSession (with an initial selection when active is set), waits for
// the manager to take it on, and connects an SDK client whose API requests are counted.
func (e *env) newAgent(name string, active *bool) *agent {
	a := &agent{e: e, name: name, id: e.ns + "." + name, api: apicount.New()}
	s := &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec:       v1alpha1.AgentSessionSpec{SessionID: a.id, PlanMode: v1alpha1.PlanModeSpec{Active: active}},
	}
	Expect(k8s.Create(suiteCtx, s)).To(Succeed())
	Eventually(func(g Gomega) {
		got := a.get()
		g.Expect(got.Status.PlanMode.Config).NotTo(BeNil())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).WithTimeout(wait).Should(Succeed())
	var err error
	a.c, err = agentsdk.New(suiteCtx, agentsdk.Options{Config: a.api.Wrap(cfg), Namespace: e.ns, Name: name, Store: e.store})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(a.c.Close)
	return a
}

func (a *agent) get() *v1alpha1.AgentSession {
	s := &v1alpha1.AgentSession{}
	Expect(k8s.Get(suiteCtx, types.NamespacedName{Namespace: a.e.ns, Name: a.name}, s)).To(Succeed())
	return s
}

// toggle is the user's selection.
func (a *agent) toggle(active bool) {
	obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: a.e.ns, Name: a.name}}
	Expect(k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"planMode":{"active":%t}}}`, active)))).To(Succeed())
}

// awaitPendingEntry waits until the agent's own watch shows the manager queued a selection
// that enters plan mode.
func (a *agent) awaitPendingEntry() {
	ctx, cancel := waitContext()
	defer cancel()
	Expect(a.c.WaitFor(ctx, func(s *v1alpha1.AgentSession) bool {
		pm := s.Status.PlanMode
		return pm.Pending && pm.PendingActive != nil && *pm.PendingActive
	})).To(Succeed())
}

func (a *agent) run(script string, onStep func(refagent.StepRecord)) refagent.Stats {
	s, err := refagent.ParseScript(strings.NewReader(script))
	Expect(err).NotTo(HaveOccurred())
	stats, err := refagent.Run(suiteCtx, refagent.Options{Client: a.c, Script: s, BoundaryTimeout: wait, OnStep: onStep})
	Expect(err).NotTo(HaveOccurred())
	return stats
}

func (a *agent) tail() harness.Tail {
	t, err := a.e.store.Tail(suiteCtx, a.id)
	Expect(err).NotTo(HaveOccurred())
	return t
}

// logEvent is a decoded event for assertions.
type logEvent struct {
	harness.Event
	label string // type, or "notice" for the plan-mode notice, "plan/mode=true|false"
}

func (a *agent) events() []logEvent {
	evs, err := a.e.store.ReadFrom(suiteCtx, a.id, 0, 0)
	Expect(err).NotTo(HaveOccurred())
	out := make([]logEvent, len(evs))
	for i, ev := range evs {
		out[i] = logEvent{Event: ev, label: ev.Type}
		switch {
		case ev.Type == harness.TypeUserMessage && strings.Contains(string(ev.Data), `"form":"notice"`):
			out[i].label = "notice"
		case ev.Type == harness.TypePlanMode:
			out[i].label = "plan/mode=" + strings.TrimSuffix(strings.TrimPrefix(string(ev.Data), `{"active":`), "}")
		}
	}
	return out
}

func labels(evs []logEvent) string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = ev.label
	}
	return strings.Join(s, " · ")
}

func find(evs []logEvent, label string, data string) int {
	for i, ev := range evs {
		if ev.label == label && strings.Contains(string(ev.Data), data) {
			return i
		}
	}
	return -1
}

func count(evs []logEvent, label string) int {
	n := 0
	for _, ev := range evs {
		if ev.label == label {
			n++
		}
	}
	return n
}

type header struct {
	Header harness.EpochHeader `json:"header"`
	Reason string              `json:"reason"`
}

func headers(evs []logEvent) []header {
	var out []header
	for _, ev := range evs {
		if ev.Type == harness.TypeRequestHeader {
			var h header
			Expect(json.Unmarshal(ev.Data, &h)).To(Succeed())
			out = append(out, h)
		}
	}
	return out
}

func toolNames(h header) []string {
	out := make([]string, 0, len(h.Header.Tools))
	for _, t := range h.Header.Tools {
		out = append(out, t.Name)
	}
	return out
}

var _ = Describe("reference agent with the real reconciler", func() {
	for _, backend := range backendNames {
		Context("on "+backend, func() {
			var e *env
			BeforeEach(func() { e = newEnv(backend) })

			It("makes no API write at steps with nothing pending", func() {
				a := e.newAgent("idle", nil)
				stats := a.run("turn one\nstep\nstep\nstep\nturn two\nstep\nretry\nstep\n", nil)
				Expect(stats.Steps).To(Equal(5))
				Expect(stats.Asked).To(BeZero())
				Expect(a.api.Writes()).To(BeZero(), "agent writes: %v", a.api.Breakdown())
				Expect(labels(a.events())).To(Equal("turn/start · step/start · user/message · request/header · step/end · " +
					"step/start · step/end · step/start · step/end · turn/end · " +
					"turn/start · step/start · user/message · step/end · step/start · step/end · turn/end"))
			})

			It("applies a selection made during a turn at the next step boundary: plan/mode before step/start, the notice last, a changed header", func() {
				a := e.newAgent("midturn", nil)
				var mgrBefore int64
				stats := a.run("turn explore\nstep\nstep draft it\nstep\n", func(r refagent.StepRecord) {
					if r.Turn == 1 && r.Step == 1 {
						mgrBefore = e.mgr.statusWrites()
						a.toggle(true)
						a.awaitPendingEntry()
					}
				})
				Expect(stats.Asked).To(Equal(1))
				Expect(stats.Notices).To(Equal(1))
				evs := a.events()
				Expect(labels(evs)).To(Equal("turn/start · step/start · user/message · request/header · step/end · " +
					"plan/mode=true · step/start · user/message · notice · request/header · step/end · " +
					"step/start · step/end · turn/end"))
				Expect(find(evs, "step/end", `"step":1`)).To(BeNumerically("<", find(evs, "plan/mode=true", "")))
				Expect(find(evs, "plan/mode=true", "")).To(BeNumerically("<", find(evs, "step/start", `"step":2`)))
				Expect(string(evs[8].Data)).To(ContainSubstring(`"summary":"The user switched this session to plan mode."`))
				Expect(string(evs[7].Data)).To(ContainSubstring(`"text":"draft it"`))
				hs := headers(evs)
				Expect(hs).To(HaveLen(2))
				Expect(hs[0].Reason).To(Equal("initial"))
				Expect(hs[0].Header.System).NotTo(ContainSubstring(section))
				Expect(toolNames(hs[0])).To(Equal([]string{"read", "write"}))
				Expect(hs[1].Reason).To(Equal("change"))
				Expect(hs[1].Header.System).To(HaveSuffix("\n\n" + section))
				Expect(toolNames(hs[1])).To(Equal([]string{harness.ExitToolName, "read", "write"}))
				// Writes for the toggle: the manager's pending and ack, the agent's one report.
				Expect(a.api.Writes()).To(BeEquivalentTo(1))
				Expect(a.api.WritesTo("PATCH", "agentsessions/status")).To(BeEquivalentTo(1))
				Expect(e.mgr.statusWrites() - mgrBefore).To(BeNumerically("<=", 2))
				Expect(a.get().Status.PlanMode.Active).To(BeTrue())
			})

			It("commits a selection made before the first turn so the first request is plan-shaped, with no notice", func() {
				a := e.newAgent("preturn", ptr.To(true))
				Eventually(func() bool { return a.tail().Active }).WithTimeout(wait).Should(BeTrue())
				a.run("turn plan it\nstep\n", nil)
				evs := a.events()
				Expect(labels(evs)).To(Equal("plan/mode=true · turn/start · step/start · user/message · request/header · step/end · turn/end"))
				hs := headers(evs)
				Expect(hs[0].Reason).To(Equal("initial"))
				Expect(hs[0].Header.System).To(ContainSubstring(section))
				Expect(toolNames(hs[0])).To(Equal([]string{harness.ExitToolName, "read", "write"}))
				Expect(a.api.Writes()).To(BeZero())
			})

			It("lands a flip between turns in the next turn's first step with one notice and no agent write", func() {
				a := e.newAgent("between", nil)
				a.run("turn first\nstep\n", nil)
				before := e.mgr.statusWrites()
				a.toggle(true)
				Eventually(func() bool { return a.tail().Active }).WithTimeout(wait).Should(BeTrue())
				Eventually(func() *v1alpha1.OwedNotice { return a.c.Session().Status.PlanMode.Notice }).WithTimeout(wait).ShouldNot(BeNil())
				Expect(e.mgr.statusWrites() - before).To(BeEquivalentTo(1))
				stats := a.run("turn second\nstep\nstep\n", nil)
				Expect(stats.Notices).To(Equal(1))
				Expect(stats.Asked).To(BeZero())
				evs := a.events()
				Expect(labels(evs)).To(Equal("turn/start · step/start · user/message · request/header · step/end · turn/end · " +
					"plan/mode=true · turn/start · step/start · user/message · notice · request/header · step/end · step/start · step/end · turn/end"))
				hs := headers(evs)
				Expect(hs[1].Reason).To(Equal("change"))
				Expect(hs[1].Header.System).To(ContainSubstring(section))
				Expect(a.api.Writes()).To(BeZero())
			})

			It("does not commit on a request-recovery retry; the selection lands at the next boundary with one notice", func() {
				a := e.newAgent("retry", nil)
				a.run("turn one\nstep\nretry\nretry\nturn two\nstep\n", func(r refagent.StepRecord) {
					if r.Turn == 1 && r.Step == 1 {
						a.toggle(true)
						a.awaitPendingEntry()
					}
				})
				evs := a.events()
				hs := headers(evs)
				Expect(hs).To(HaveLen(2))
				Expect(hs[0].Header.System).NotTo(ContainSubstring(section))
				Expect(hs[1].Header.System).To(ContainSubstring(section))
				end11 := find(evs, "step/end", `"turn":1,"step":1`)
				pm := find(evs, "plan/mode=true", "")
				start21 := find(evs, "step/start", `"turn":2,"step":1`)
				Expect(end11).To(BeNumerically(">=", 0))
				Expect(pm).To(BeNumerically(">", end11))
				Expect(start21).To(BeNumerically(">", pm))
				Expect(count(evs, "plan/mode=true")).To(Equal(1))
				Expect(count(evs, "notice")).To(Equal(1))
			})

			It("nets out a selection toggled back before the boundary: no plan/mode, no notice", func() {
				a := e.newAgent("netzero", nil)
				a.run("turn one\nstep\nstep\n", func(r refagent.StepRecord) {
					if r.Turn == 1 && r.Step == 1 {
						a.toggle(true)
						a.awaitPendingEntry()
						a.toggle(false)
						ctx, cancel := waitContext()
						defer cancel()
						Expect(a.c.WaitFor(ctx, func(s *v1alpha1.AgentSession) bool {
							sel := s.Status.PlanMode.Selection
							return sel != nil && !*sel && !s.Status.PlanMode.Pending
						})).To(Succeed())
					}
				})
				evs := a.events()
				Expect(count(evs, "plan/mode=true")).To(BeZero())
				Expect(count(evs, "plan/mode=false")).To(BeZero())
				Expect(count(evs, "notice")).To(BeZero())
				Expect(headers(evs)).To(HaveLen(1))
			})

			It("fails the proposal when the manager answers that the append failed, keeps the selection pending, and commits it in a later turn once the store is back (v3)", func() {
				a := e.newAgent("appendfail", nil)
				var recs []refagent.StepRecord
				stats := a.run("turn one\nstep\nstep\nstep\nturn two\nstep\n", func(r refagent.StepRecord) {
					recs = append(recs, r)
					switch {
					case r.Turn == 1 && r.Step == 1:
						e.mgr.store.fail.Store(true)
						a.toggle(true)
						a.awaitPendingEntry()
					case r.Err != nil:
						e.mgr.store.fail.Store(false) // the store is back before the next turn
					}
				})
				Expect(stats.FailedProposals).To(Equal(1), "the failed append failed step 2's proposal")
				Expect(recs).To(HaveLen(3), "turn one's step 3 is skipped: its turn ended blocked")
				var pf *agentsdk.ProposalFailedError
				Expect(errors.As(recs[1].Err, &pf)).To(BeTrue(), "step 2: %v", recs[1].Err)
				Expect(pf.Reason).To(Equal(v1alpha1.ReasonLogStoreError))
				Expect(recs[2].Turn).To(BeEquivalentTo(2))
				Expect(recs[2].Active).To(BeTrue(), "turn two's first boundary applied the selection")
				Expect(recs[2].Notice).To(Equal(harness.NoticePlanOn))
				evs := a.events()
				Expect(count(evs, "plan/mode=true")).To(Equal(1))
				Expect(labels(evs)).To(ContainSubstring("step/end · turn/end · turn/start · plan/mode=true · step/start"))
				Expect(string(evs[find(evs, "turn/end", `"turn":1`)].Data)).To(ContainSubstring(`"kind":"blocked"`))
				Expect(count(evs, "notice")).To(Equal(1))
			})

			It("goes on without a manager after the bound, and takes the manager's late plan/mode for the same step once it is back", func() {
				a := e.newAgent("timeout", nil)
				turn, err := a.c.StartTurn(suiteCtx)
				Expect(err).NotTo(HaveOccurred())
				res, err := a.c.Boundary(suiteCtx, turn, 1, wait)
				Expect(err).NotTo(HaveOccurred())
				Expect(a.c.StartStep(suiteCtx, res, agentsdk.StepInput{Messages: []harness.Event{agentsdk.UserText("hi")},
					Header: &harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}, System: "s"}})).To(Succeed())
				Expect(a.c.EndStep(suiteCtx, turn, 1)).To(Succeed())
				a.toggle(true)
				a.awaitPendingEntry()
				e.mgr.stop()
				start := time.Now()
				res, err = a.c.Boundary(suiteCtx, turn, 2, 300*time.Millisecond)
				Expect(err).NotTo(HaveOccurred())
				Expect(time.Since(start)).To(BeNumerically("<", 300*time.Millisecond+time.Second), "the bound plus one API round trip")
				Expect(res.Unanswered).To(BeTrue())
				Expect(res.Active).To(BeFalse(), "the step would run under the committed state")
				Expect(count(a.events(), "plan/mode=true")).To(BeZero())

				e.mgr = startManager(e.store)
				Eventually(func() int64 { return a.tail().LastPlanModeSeq }).WithTimeout(wait).Should(BeNumerically(">=", 0))
				var res2 agentsdk.Result
				Eventually(func() error {
					var err error
					res2, err = a.c.Boundary(suiteCtx, turn, 2, time.Second)
					return err
				}).WithTimeout(wait).Should(Succeed())
				Expect(res2.Active).To(BeTrue())
				Expect(res2.Notice).To(Equal(harness.NoticePlanOn))
				Expect(res2.NextSeq).To(Equal(a.tail().NextSeq))
				Expect(a.api.WritesTo("PATCH", "agentsessions/status")).To(BeEquivalentTo(1))
			})

			It("closes the open turn when stopped mid-turn; the pending selection waits for the next turn's first step (v2)", func() {
				a := e.newAgent("stopped", nil)
				s, err := refagent.ParseScript(strings.NewReader("turn forever\nstep\nstep\nstep\n"))
				Expect(err).NotTo(HaveOccurred())
				ctx, stop := waitContext()
				defer stop()
				_, err = refagent.Run(ctx, refagent.Options{Client: a.c, Script: s, Loop: true, StepDelay: 20 * time.Millisecond, BoundaryTimeout: wait,
					OnStep: func(r refagent.StepRecord) {
						if r.Turn == 2 && r.Step == 2 {
							a.toggle(true)
							a.awaitPendingEntry()
							stop() // the agent is stopped during turn 2, the selection still pending
						}
					}})
				Expect(err).To(MatchError(context.Canceled))
				evs := a.events()
				Expect(labels(evs)).To(HaveSuffix("turn/start · step/start · user/message · step/end · step/start · step/end · turn/end"))
				Expect(string(evs[len(evs)-1].Data)).To(Equal(`{"turn":2,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}`))
				Expect(a.tail().TurnOpen).To(BeFalse())
				// Selected during turn 2: nothing is appended because the turn ended.
				Consistently(func() int { return count(a.events(), "plan/mode=true") }).WithTimeout(time.Second).Should(BeZero())
				Expect(a.get().Status.PlanMode.Pending).To(BeTrue())
				stats := a.run("turn three\nstep\n", nil)
				Expect(stats.Asked).To(Equal(1))
				Expect(labels(a.events())).To(HaveSuffix("turn/start · plan/mode=true · step/start · user/message · notice · request/header · step/end · turn/end"))
			})

			It("starts a turn for a message sent to an idle agent, and records each queued message once, in order", func() {
				a := e.newAgent("idle", nil)
				s, err := refagent.ParseScript(strings.NewReader("turn one\nstep\n"))
				Expect(err).NotTo(HaveOccurred())
				ctx, stop := waitContext()
				defer stop()
				done := make(chan error, 1)
				go func() {
					_, err := refagent.Run(ctx, refagent.Options{Client: a.c, Script: s, WaitForMessages: true, BoundaryTimeout: wait})
					done <- err
				}()
				Eventually(func() bool { t := a.tail(); return t.Turn == 1 && !t.TurnOpen }).WithTimeout(wait).Should(BeTrue())
				obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: a.name}}
				Expect(k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType,
					[]byte(`{"spec":{"steerQueue":[{"id":"m1","text":"hello"},{"id":"m2","text":"and this"}]}}`)))).To(Succeed())
				// The idle agent starts turn 2 for them, and ends it.
				Eventually(func() bool { t := a.tail(); return t.Turn == 2 && !t.TurnOpen }).WithTimeout(wait).Should(BeTrue())
				stop()
				Eventually(done).WithTimeout(wait).Should(Receive(BeNil()))
				var texts []string
				for _, ev := range a.events() {
					if ev.Type == harness.TypeUserMessage {
						texts = append(texts, string(ev.Data))
					}
				}
				Expect(texts).To(HaveLen(3), "the script's prompt, then the two messages once each")
				Expect(texts[1]).To(ContainSubstring(`"text":"hello"`))
				Expect(texts[2]).To(ContainSubstring(`"text":"and this"`))
				Expect(labels(a.events())).To(HaveSuffix("turn/end · turn/start · step/start · user/message · user/message · step/end · turn/end"))
				Expect(a.get().Status.Agent.SteerID).To(Equal("m2"))
			})

			It("runs many agents at once, each toggled during a turn: one plan/mode and one notice each", func() {
				const n = 12
				agents := make([]*agent, n)
				for i := range agents {
					agents[i] = e.newAgent(fmt.Sprintf("many-%02d", i), nil)
				}
				var wg sync.WaitGroup
				errs := make([]error, n)
				for i, a := range agents {
					wg.Add(1)
					go func() {
						defer GinkgoRecover()
						defer wg.Done()
						s, _ := refagent.ParseScript(strings.NewReader("turn go\nstep\nstep\nstep\n"))
						var toggleErr error
						stats, err := refagent.Run(suiteCtx, refagent.Options{Client: a.c, Script: s, BoundaryTimeout: wait,
							OnStep: func(r refagent.StepRecord) {
								if r.Turn == 1 && r.Step == 1 {
									obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: a.name}}
									toggleErr = k8s.Patch(suiteCtx, obj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"planMode":{"active":true}}}`)))
									ctx, cancel := waitContext()
									defer cancel()
									toggleErr = errors.Join(toggleErr, a.c.WaitFor(ctx, func(s *v1alpha1.AgentSession) bool { return s.Status.PlanMode.Pending }))
								}
							}})
						errs[i] = errors.Join(err, toggleErr)
						if err == nil && stats.Notices != 1 {
							errs[i] = fmt.Errorf("agent %s recorded %d notices", a.name, stats.Notices)
						}
					}()
				}
				wg.Wait()
				Expect(errors.Join(errs...)).NotTo(HaveOccurred())
				for _, a := range agents {
					evs := a.events()
					Expect(count(evs, "plan/mode=true")).To(Equal(1), a.name)
					Expect(count(evs, "notice")).To(Equal(1), a.name)
					Expect(labels(evs)).To(ContainSubstring("step/end · plan/mode=true · step/start"), a.name)
					Expect(a.api.Writes()).To(BeEquivalentTo(1), a.name)
				}
			})
		})
	}
})
