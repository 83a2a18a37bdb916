package controllers

import (
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

var _ = Describe("AgentSession reconciler", func() {
	for _, name := range []string{"sqlite", "postgres"} {
		Context("with the "+name+" log store", func() {
			reconcilerSpecs(func() *backend { return backends[name] })
		})
	}
})

func reconcilerSpecs(be func() *backend) {
	var (
		ns  string
		mgr *testManager
	)
	T, F := ptr.To(true), ptr.To(false)

	// start gives each spec its own namespace, default PlanModeConfig and manager.
	start := func() {
		ns = newNamespace(true)
		mgr = startManager(ns, be().mgrStore, managerOptions{})
	}

	Describe("the set() decision table through spec.planMode.active (reference 4.5)", func() {
		BeforeEach(start)

		It("commits between turns at once, with exactly one status write per toggle and none when nothing changed", func() {
			a := newSession(ns, "idle", nil, nil, be().agentStore)
			as := a.settled(false, false)
			Expect(readyReason(as)).To(Equal("True/InSync"))
			expectWrites(&mgr.statusWrites, 1, "the first status of a new session")

			for i, v := range []*bool{T, F, T} {
				before := mgr.statusWrites.Load()
				setActive(a.key, v)
				as = a.settled(*v, false)
				expectWrites(&mgr.statusWrites, before+1, fmt.Sprintf("toggle %d: one status write", i))
			}
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false, true}))
			Expect(as.Status.PlanMode.NextSeq).To(BeEquivalentTo(3))

			// The same value again is a noop (edge-triggered), and a reconcile with nothing
			// changed writes nothing.
			before := mgr.statusWrites.Load()
			setActive(a.key, T)
			Expect(k8sClient.Get(suiteCtx, a.key, as)).To(Succeed())
			as.Annotations = map[string]string{"touched": "yes"}
			Expect(k8sClient.Update(suiteCtx, as)).To(Succeed())
			expectWrites(&mgr.statusWrites, before, "nothing changed: no write")
			Expect(a.planModes()).To(HaveLen(3))
			Expect(mgr.otherWrites.Load()).To(BeZero(), "the manager writes nothing but status")
			Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Normal/" + EventReasonCommitted))
		})

		It("names the session in its transition Events without a resourceVersion, so repeats join one series", func() {
			a := newSession(ns, "series", nil, nil, be().agentStore)
			a.settled(false, false)
			for _, v := range []*bool{T, F, T} {
				setActive(a.key, v)
				a.settled(*v, false)
			}
			uid := a.get().UID
			committed := func(action string) func(Gomega) eventsv1.Event {
				return func(g Gomega) eventsv1.Event {
					var list eventsv1.EventList
					g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
					var got []eventsv1.Event
					for _, e := range list.Items {
						if e.Regarding.Name == a.key.Name && e.Reason == EventReasonCommitted && e.Action == action {
							got = append(got, e)
						}
					}
					g.Expect(got).To(HaveLen(1), "one Event per (reason, action)")
					return got[0]
				}
			}
			want := corev1.ObjectReference{APIVersion: "agents.harness.dev/v1alpha1", Kind: "AgentSession",
				Namespace: ns, Name: a.key.Name, UID: uid}
			Eventually(func(g Gomega) {
				enter := committed("EnterPlanMode")(g)
				g.Expect(enter.Regarding).To(Equal(want))
				g.Expect(enter.Series).NotTo(BeNil(), "the second commit of plan mode on joins the first's Event")
				g.Expect(enter.Series.Count).To(BeEquivalentTo(2))
			}, timeout, interval).Should(Succeed())
			leave := committed("LeavePlanMode")(Default)
			Expect(leave.Regarding).To(Equal(want))
			Expect(leave.Series).To(BeNil())
		})

		It("checks a status it did not write against the log: a split brain's lost selection is committed again", func() {
			a := newSession(ns, "split", nil, nil, be().agentStore)
			a.settled(false, false)
			setActive(a.key, T)
			a.settled(true, false)
			// A second manager with a stale cache appends plan/mode false after the commit (the
			// compare-and-swap passes) and its status write is refused: the log ends with false,
			// the status (the running manager's own write) still says true.
			a.append(harness.PlanModeEvent(0, false))
			Expect(a.tail().Active).To(BeFalse())

			// That second manager reconciles again. The status is not its own write, so it does not
			// take it as settled: it reads the log, and the user's selection is committed again.
			second := &AgentSessionReconciler{Client: k8sClient, Store: be().mgrStore}
			_, err := second.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
			Expect(err).NotTo(HaveOccurred())
			Expect(a.tail().Active).To(BeTrue(), "the selection the log lost is committed again")
			Eventually(func(g Gomega) {
				g.Expect(a.get().Status.PlanMode.Active).To(Equal(a.tail().Active))
			}, timeout, interval).Should(Succeed())
		})

		It("after a restart, reads the log once for an unchanged session, then takes its status as settled", func() {
			a := newSession(ns, "restart", nil, nil, be().agentStore)
			a.settled(false, false)
			setActive(a.key, T)
			before := a.settled(true, false)

			// A manager that has written nothing yet (just started, or just elected) checks the
			// status against the log once; it matches, so nothing is written.
			store := &faultStore{Store: be().mgrStore}
			restarted := &AgentSessionReconciler{Client: k8sClient, Store: store}
			for i := 0; i < 3; i++ {
				_, err := restarted.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(store.tails.Load()).To(Equal(int64(1)), "only the first reconcile reads the log tail")
			Expect(a.get().ResourceVersion).To(Equal(before.ResourceVersion), "a status that matches the log is not rewritten")

			// A status it neither wrote nor checked is read against the log again: here the
			// other manager commits a new selection.
			setActive(a.key, F)
			a.settled(false, false)
			_, err := restarted.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
			Expect(err).NotTo(HaveOccurred())
			Expect(store.tails.Load()).To(Equal(int64(2)), "a status this manager has not checked is read against the log")
		})

		It("queues during an open turn, cancels a reversal without logging, and noops a repeat", func() {
			a := newSession(ns, "open", nil, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)

			setActive(a.key, T) // L=F, open, set(T) -> queued
			as := a.settled(false, true)
			Expect(as.Status.PlanMode.PendingActive).To(Equal(T))
			Expect(as.Status.PlanMode.PendingSource).To(Equal(agentsv1alpha1.PendingSourceUser))
			Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonSelectionPending))

			setActive(a.key, F) // L=F, P=T, open, set(F) -> cancelled, residue kept
			as = a.settled(false, false)
			Expect(as.Status.PlanMode.PendingActive).To(Equal(F), "the cancelled residue is kept until a boundary")

			setActive(a.key, T) // L=F, P=F residue, open, set(T) -> queued
			a.settled(false, true)
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "nothing is logged during the turn")

			// The boundary commits it.
			r := a.boundary(1, 1)
			Expect(r.asked).To(BeTrue())
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(BeEmpty(), "no header yet: nothing to narrate")
			a.settled(true, false)
			Expect(activeValues(a.planModes())).To(Equal([]bool{true}))

			// L=T open set(F) -> queued exit after the turn's final boundary: the turn ends and
			// it stays pending (the newest plan document); a later turn's boundary appends it.
			setActive(a.key, F)
			a.settled(true, true)
			a.endStep(1, 1)
			a.endTurn("completed")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(Equal(1), "nothing is appended at turn/end")
			a.startTurn(2)
			r = a.boundary(2, 1)
			Expect(r.asked).To(BeTrue())
			Expect(r.committed).To(BeFalse())
			Expect(r.notice).To(Equal(harness.NoticeDefault), "the last header told plan mode")
			a.settled(false, false)
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false}))
		})

		It("cancels between turns a selection that returns to the logged state", func() {
			a := newSession(ns, "cancel", F, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)
			setActive(a.key, T)
			a.settled(false, true)
			// Reverted while the turn is still open, then the turn ends: nothing is logged.
			setActive(a.key, F)
			a.settled(false, false)
			a.endTurn("completed")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero())
			Expect(a.get().Status.PlanMode.Pending).To(BeFalse())
		})
	})

	Describe("the step boundary (reference 4.6, 4.7)", func() {
		BeforeEach(start)

		It("flushes a pending selection at the boundary, before step/start, with one notice and at most 3 API writes", func() {
			a := newSession(ns, "flush", nil, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)
			r := a.boundary(1, 1)
			Expect(r.asked).To(BeFalse(), "nothing pending: no API write at the step")
			Expect(a.apiWrites).To(BeZero())
			a.endStep(1, 1)

			before := stableWrites(&mgr.statusWrites)
			setActive(a.key, T)
			a.settled(false, true)
			r = a.boundary(1, 2)
			Expect(r.asked).To(BeTrue())
			Expect(r.ack.Result).To(Equal(agentsv1alpha1.BoundaryAdmitted))
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(Equal(harness.NoticePlanOn))
			Expect(r.ack.NextSeq).To(Equal(r.ack.Seq + 1))
			a.settled(true, false)
			expectWrites(&mgr.statusWrites, before+2, "pending + acknowledgement")
			Expect(a.apiWrites).To(Equal(1), "the agent's one report")

			pm := a.seqOf(harness.TypePlanMode)
			Expect(pm).To(Equal([]int64{r.ack.Seq}))
			stepStarts := a.seqOf(harness.TypeStepStart)
			Expect(stepStarts[1]).To(Equal(pm[0]+1), "plan/mode lands right before the step's step/start")

			// A second boundary: nothing pending, no write, no second notice.
			a.endStep(1, 2)
			r = a.boundary(1, 3)
			Expect(r.asked).To(BeFalse())
			Expect(r.notice).To(BeEmpty())
			Expect(r.committed).To(BeTrue())
			Expect(a.notices).To(Equal([]string{harness.NoticePlanOn}))
		})

		DescribeTable("narration at the boundary",
			func(initial *bool, preHeader bool, flips []bool, wantActive bool, wantNotices []string, wantPlanModes int) {
				a := newSession(ns, "narr", initial, nil, be().agentStore)
				a.settled(initial != nil && *initial, false)
				a.startTurn(1)
				if preHeader {
					r := a.boundary(1, 1) // logs a header that describes the initial state
					Expect(r.notice).To(BeEmpty())
					a.endStep(1, 1)
				}
				for _, f := range flips {
					setActive(a.key, ptr.To(f))
					Eventually(func() *bool { return a.get().Status.PlanMode.Selection }, timeout, interval).Should(Equal(ptr.To(f)))
				}
				r := a.boundary(1, 2)
				Expect(r.committed).To(Equal(wantActive))
				a.endStep(1, 2)
				r = a.boundary(1, 3) // narrates once only
				Expect(r.notice).To(BeEmpty())
				Expect(a.notices).To(Equal(wantNotices))
				Expect(a.planModes()).To(HaveLen(wantPlanModes))
				a.settled(wantActive, false)
			},
			Entry("no header yet: no notice", nil, false, []bool{true}, true, []string(nil), 1),
			Entry("differs from the last header: narrated once", nil, true, []bool{true}, true, []string{harness.NoticePlanOn}, 1),
			Entry("back to default with the default wording", ptr.To(true), true, []bool{false}, false, []string{harness.NoticeDefault}, 2),
			Entry("net-zero flips: no append, no notice", nil, true, []bool{true, false}, false, []string(nil), 0),
			Entry("net-zero after a longer flip sequence", nil, true, []bool{true, false, true, false}, false, []string(nil), 0),
		)

		It("stays silent when the last header already describes the flushed state", func() {
			a := newSession(ns, "silent", T, nil, be().agentStore)
			a.settled(true, false)
			a.startTurn(1)
			Expect(a.boundary(1, 1).committed).To(BeTrue()) // header told T
			a.endStep(1, 1)
			a.endTurn("completed")
			setActive(a.key, F) // between turns: F, notice owed (told T)
			a.settled(false, false)
			a.startTurn(2)
			setActive(a.key, T) // queued during turn 2, before its first boundary
			a.settled(false, true)
			r := a.boundary(2, 1)
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(BeEmpty(), "told T, flushed T: silent, and the owed 'default' notice is superseded")
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false, true}))
			Expect(a.notices).To(BeEmpty())
		})

		It("does not commit on request-recovery retries; the flip lands at the next turn's first step boundary with one notice", func() {
			a := newSession(ns, "retry", nil, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)
			Expect(a.boundary(1, 1).committed).To(BeFalse())
			setActive(a.key, T) // at error settlement, during step 1
			a.settled(false, true)
			a.header(false, harness.HeaderReasonChange) // the retry reuses the frozen assembly: no boundary
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "no boundary, no append")
			as := a.get()
			Expect(as.Status.PlanMode.Active).To(BeFalse())
			Expect(as.Status.PlanMode.Pending).To(BeTrue())

			a.endStep(1, 1)
			a.endTurn("completed")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "selected during turn 1: waits for a later turn's boundary")

			a.startTurn(2)
			r := a.boundary(2, 1)
			Expect(r.asked).To(BeTrue())
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(Equal(harness.NoticePlanOn))
			a.endStep(2, 1)
			Expect(a.boundary(2, 2).notice).To(BeEmpty())
			Expect(a.notices).To(Equal([]string{harness.NoticePlanOn}), "one notice")

			pm := a.seqOf(harness.TypePlanMode)
			Expect(pm).To(HaveLen(1))
			stepEnd11 := a.seqOf(harness.TypeStepEnd)[0]
			stepStarts := a.seqOf(harness.TypeStepStart)
			Expect(stepEnd11).To(BeNumerically("<", pm[0]))
			Expect(pm[0]).To(BeNumerically("<", stepStarts[1]), "step/end(1,1) < plan/mode < step/start(2,1)")
			headers := a.seqOf(harness.TypeRequestHeader)
			Expect(headers).To(HaveLen(4))
		})

		It("makes the first request plan-shaped when selected before the first turn", func() {
			a := newSession(ns, "first", T, nil, be().agentStore)
			a.settled(true, false)
			a.startTurn(1)
			r := a.boundary(1, 1)
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(BeEmpty())
			pm := a.seqOf(harness.TypePlanMode)
			headers := a.seqOf(harness.TypeRequestHeader)
			Expect(pm).To(Equal([]int64{0}))
			Expect(pm[0]).To(BeNumerically("<", headers[0]))
			evs := a.events()
			Expect(string(evs[headers[0]].Data)).To(ContainSubstring("You are in plan mode."))
			Expect(string(evs[headers[0]].Data)).To(ContainSubstring(`"reason":"initial"`))
		})

		It("refuses an invalid boundary report with a Failed ack, a condition and a Warning event, never appending", func() {
			a := newSession(ns, "invalid", nil, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)
			setActive(a.key, T)
			a.settled(false, true)
			seq := a.tail().NextSeq
			a.report(1, 1, seq+5)
			ack := a.awaitAck(1, 1, seq+5)
			Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
			Expect(ack.Message).To(ContainSubstring("status.agent.boundary.seq"))
			Eventually(func() string { return readyReason(a.get()) }, timeout, interval).Should(Equal("False/" + agentsv1alpha1.ReasonInvalidBoundary))
			Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonInvalidBoundary))
			a.report(2, 1, seq) // wrong turn
			Expect(a.awaitAck(2, 1, seq).Message).To(ContainSubstring("status.agent.boundary.turn"))
			Expect(a.planModes()).To(BeEmpty())

			// A valid report afterwards is admitted and clears the condition.
			r := a.boundary(1, 1)
			Expect(r.committed).To(BeTrue())
			Eventually(func() string { return readyReason(a.get()) }, timeout, interval).Should(Equal("True/InSync"))

			// A step reported again at a later seq (the agent appended something else instead
			// of its step/start) is refused: it was admitted already.
			a.endStep(1, 1)
			first := a.tail().NextSeq
			a.report(1, 2, first)
			Expect(a.awaitAck(1, 2, first).Result).To(Equal(agentsv1alpha1.BoundaryAdmitted))
			a.header(true, harness.HeaderReasonChange)
			a.report(1, 2, first+1)
			again := a.awaitAck(1, 2, first+1)
			Expect(again.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
			Expect(again.Message).To(ContainSubstring("already admitted"))
			Expect(a.planModes()).To(HaveLen(1))
		})
	})

	Describe("append failure", func() {
		BeforeEach(start)

		It("answers the boundary Failed, keeps the selection pending, and commits it at a later boundary once the store is back", func() {
			a := newSession(ns, "fail", nil, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)
			a.boundary(1, 1)
			a.endStep(1, 1)
			setActive(a.key, T)
			a.settled(false, true)

			mgr.store.failPlanMode.Store(true)
			r := a.boundary(1, 2)
			Expect(r.failed).To(BeTrue())
			Expect(r.ack.Message).To(ContainSubstring("injected fault"))
			as := a.settled(false, true)
			Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonLogStoreError))
			Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonLogStoreError))
			Expect(a.planModes()).To(BeEmpty())

			// A v2 agent goes on under the committed state; its turn ends. The selection was
			// queued in the turn: it waits for a later turn's boundary, also once the store is back.
			a.endTurn("completed")
			mgr.store.failPlanMode.Store(false)
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero())
			Expect(a.get().Status.PlanMode.Pending).To(BeTrue())

			a.startTurn(2)
			r = a.boundary(2, 1)
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(Equal(harness.NoticePlanOn), "the earlier header told default mode")
			as = a.settled(true, false)
			Expect(readyReason(as)).To(Equal("True/InSync"))
			Expect(a.planModes()).To(HaveLen(1))
		})

		It("keeps a between-turns selection pending while the store fails, and reports it", func() {
			a := newSession(ns, "failidle", nil, nil, be().agentStore)
			a.settled(false, false)
			mgr.store.failPlanMode.Store(true)
			setActive(a.key, T)
			Eventually(func(g Gomega) {
				as := a.get()
				g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonLogStoreError))
				g.Expect(as.Status.PlanMode.Pending).To(BeTrue())
				g.Expect(as.Status.PlanMode.PendingActive).To(Equal(T))
			}, timeout, interval).Should(Succeed())
			Expect(a.planModes()).To(BeEmpty())

			mgr.store.failTail.Store(true) // the whole store is unreachable now
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero())
			mgr.store.failTail.Store(false)
			mgr.store.failPlanMode.Store(false)
			a.settled(true, false)
			Expect(a.planModes()).To(HaveLen(1))
		})
	})

	Describe("fork and spawn (reference 4.12)", func() {
		BeforeEach(start)

		It("inherits the logged state of the copied completed-turn prefix; a spawned session starts inactive", func() {
			parent := newSession(ns, "parent", nil, nil, be().agentStore)
			parent.settled(false, false)
			parent.startTurn(1)
			setActive(parent.key, T)
			parent.settled(false, true)
			Expect(parent.boundary(1, 1).committed).To(BeTrue())
			parent.endStep(1, 1)
			parent.endTurn("completed")
			setActive(parent.key, F) // between turns, after the last turn/end: not inherited
			parent.settled(false, false)

			child := newSession(ns, "child", nil, &agentsv1alpha1.ForkSource{SessionID: parent.sid}, be().agentStore)
			as := child.settled(true, false)
			Expect(as.Status.PlanMode.NextSeq).To(BeEquivalentTo(parent.tail().NextSeq - 1))
			Expect(child.planModes()).To(HaveLen(1), "the inherited plan/mode only; nothing appended")
			Expect(as.Status.PlanMode.Notice).To(BeNil(), "an inherited plan/mode owes no notice")
			Expect(eventReasons(child.key)).NotTo(ContainElement(HavePrefix("Warning/")), "seeding a fork needs no one")

			spawned := newSession(ns, "spawned", nil, nil, be().agentStore)
			spawned.settled(false, false)
			Expect(spawned.planModes()).To(BeEmpty())

			// Selections work on a forked session as on any other.
			setActive(child.key, F)
			child.settled(false, false)
			Expect(activeValues(child.planModes())).To(Equal([]bool{true, false}))
		})
	})

	Describe("crash safety", func() {
		It("does not append again after a crash between the append and the status write (between turns)", func() {
			ns = newNamespace(true)
			m1 := startManager(ns, be().mgrStore, managerOptions{})
			a := newSession(ns, "crash", nil, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)
			a.boundary(1, 1) // header told F
			a.endStep(1, 1)
			a.endTurn("completed")
			m1.stop()

			// The toggle is processed by a reconciler that appends and then dies before its
			// status write: run its compute step alone and drop the result.
			setActive(a.key, T)
			r := &AgentSessionReconciler{Client: k8sClient, Store: be().mgrStore}
			out, err := r.compute(suiteCtx, a.get())
			Expect(err).NotTo(HaveOccurred())
			Expect(out.changed).To(BeTrue())
			Expect(a.planModes()).To(HaveLen(1))
			Expect(a.get().Status.PlanMode.Active).To(BeFalse(), "no status was written")

			m2 := startManager(ns, be().mgrStore, managerOptions{})
			as := a.settled(true, false)
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(Equal(1), "no duplicate plan/mode")
			Expect(as.Status.PlanMode.Notice).NotTo(BeNil(), "the owed notice is recovered from the log")
			Expect(as.Status.PlanMode.Notice.Text).To(Equal(harness.NoticePlanOn))
			Expect(m2.store.appends.Load()).To(BeZero())

			a.startTurn(2)
			Expect(a.boundary(2, 1).notice).To(Equal(harness.NoticePlanOn))
		})

		It("does not append again after a crash between the boundary append and the acknowledgement", func() {
			ns = newNamespace(true)
			m1 := startManager(ns, be().mgrStore, managerOptions{})
			a := newSession(ns, "crashb", nil, nil, be().agentStore)
			a.settled(false, false)
			a.startTurn(1)
			a.boundary(1, 1)
			a.endStep(1, 1)
			setActive(a.key, T)
			a.settled(false, true)
			m1.stop()

			seq := a.tail().NextSeq
			a.report(1, 2, seq)
			r := &AgentSessionReconciler{Client: k8sClient, Store: be().mgrStore}
			_, err := r.compute(suiteCtx, a.get())
			Expect(err).NotTo(HaveOccurred())
			Expect(a.seqOf(harness.TypePlanMode)).To(Equal([]int64{seq}))

			m2 := startManager(ns, be().mgrStore, managerOptions{})
			ack := a.awaitAck(1, 2, seq)
			Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryAdmitted))
			Expect(ack.Active).To(BeTrue())
			Expect(ack.NextSeq).To(Equal(seq + 1))
			Expect(ack.Notice).To(Equal(harness.NoticePlanOn), "the narration is recomputed, not lost")
			a.settled(true, false)
			Expect(m2.store.appends.Load()).To(BeZero())
			Expect(a.planModes()).To(HaveLen(1))
		})

		It("recovers from a lost status write without a duplicate append", func() {
			start()
			a := newSession(ns, "lost", nil, nil, be().agentStore)
			a.settled(false, false)
			mgr.failStatus.Store(1)
			setActive(a.key, T)
			a.settled(true, false)
			Expect(mgr.failStatus.Load()).To(BeZero(), "the injected failure was hit")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(Equal(1))
		})

		It("refuses a status computed from a stale read, but not because the agent wrote status.agent", func() {
			start()
			a := newSession(ns, "stale", nil, nil, be().agentStore)
			a.settled(false, false)
			stale := a.get()
			setActive(a.key, T)
			a.settled(true, false)
			mgr.stop()

			r := &AgentSessionReconciler{Client: k8sClient, Store: be().mgrStore}
			write := func(r *AgentSessionReconciler, basis *agentsv1alpha1.AgentSession, status agentsv1alpha1.AgentSessionStatus) (ctrl.Result, error) {
				return r.patchStatus(suiteCtx, &sessionScope{r: r, session: basis, status: status, changed: true})
			}
			undo := *stale.Status.DeepCopy()
			undo.PlanMode.Selection = F
			for i := 0; i < 2; i++ { // each carries the stale resourceVersion: a conflict, and the live status differs
				res, err := write(r, stale, undo)
				Expect(err).NotTo(HaveOccurred(), "attempt %d", i)
				Expect(res.RequeueAfter).To(Equal(staleRequeue), "attempt %d: refused as stale, recomputed soon", i)
			}
			as := a.get()
			Expect(as.Status.PlanMode.Active).To(BeTrue())
			Expect(as.Status.PlanMode.Selection).To(Equal(T))

			// The agent's own write in between is no conflict for the manager's fields.
			fresh := a.get()
			a.startTurn(1)
			a.report(1, 1, a.tail().NextSeq)
			next := *fresh.Status.DeepCopy()
			next.PlanMode.Selection = F
			r2 := &AgentSessionReconciler{Client: k8sClient, Store: be().mgrStore}
			res, err := write(r2, fresh, next)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.IsZero()).To(BeTrue())
			as = a.get()
			Expect(as.Status.PlanMode.Selection).To(Equal(F))
			Expect(as.Status.Agent).NotTo(BeNil())
			Expect(as.Status.Agent.Boundary).NotTo(BeNil(), "the agent's report is kept")

			// Holding its own last write, the manager sends the changed fields alone, with no
			// precondition: the agent's next write is no conflict either, and is kept.
			Expect(r2.patcher().unchangedSince(a.key, &as.Status)).To(BeTrue(), "the stored manager-owned status is r2's write")
			a.report(1, 1, a.tail().NextSeq+1)
			next = *as.Status.DeepCopy()
			next.PlanMode.Selection = T
			res, err = write(r2, as, next)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.IsZero()).To(BeTrue())
			as = a.get()
			Expect(as.Status.PlanMode.Selection).To(Equal(T))
			Expect(as.Status.Agent.Boundary.Seq).To(Equal(a.tail().NextSeq+1), "the agent's newer report is kept")
		})

		It("forgets a deleted session's side state", func() {
			start()
			a := newSession(ns, "forget", nil, nil, be().agentStore)
			a.settled(false, false)
			held := func() bool { _, ok := mgr.r.patcher().remembered(a.key); return ok }
			// The write is visible before the reconciler has recorded it: wait for the record.
			Eventually(held, timeout, interval).Should(BeTrue(), "the manager holds its last write of the session")
			Expect(k8sClient.Delete(suiteCtx, a.get())).To(Succeed())
			Eventually(held, timeout, interval).Should(BeFalse(), "forgotten once the session is gone")
		})

		It("applies a selection made while the manager is down when it returns", func() {
			ns = newNamespace(true)
			m1 := startManager(ns, be().mgrStore, managerOptions{})
			a := newSession(ns, "down", nil, nil, be().agentStore)
			b := newSession(ns, "down-open", nil, nil, be().agentStore)
			a.settled(false, false)
			b.settled(false, false)
			b.startTurn(1)
			m1.stop()
			setActive(a.key, T)
			setActive(b.key, T)
			Consistently(func() bool { return a.get().Status.PlanMode.Active }, quiet, interval).Should(BeFalse())
			startManager(ns, be().mgrStore, managerOptions{})
			a.settled(true, false)
			b.settled(false, true)
			Expect(b.boundary(1, 1).committed).To(BeTrue())
		})

		It("writes only from the leader when two managers run with leader election", func() {
			ns = newNamespace(true)
			id := "planmode-" + ns
			m1 := startManager(ns, be().mgrStore, managerOptions{leaderElectionID: id})
			m2 := startManager(ns, be().mgrStore, managerOptions{leaderElectionID: id})
			var leader, follower *testManager
			Eventually(func() bool {
				switch {
				case m1.elected():
					leader, follower = m1, m2
				case m2.elected():
					leader, follower = m2, m1
				}
				return leader != nil
			}, timeout, interval).Should(BeTrue())
			Expect(follower.elected()).To(BeFalse())

			a := newSession(ns, "le", nil, nil, be().agentStore)
			a.settled(false, false)
			setActive(a.key, T)
			a.settled(true, false)
			Consistently(follower.statusWrites.Load, quiet, interval).Should(BeZero(), "the follower never writes")
			Eventually(leader.statusWrites.Load, timeout, interval).Should(BeNumerically(">=", 2))
			Expect(follower.store.appends.Load()).To(BeZero())

			leader.stop() // releases the lease
			leaderWrites := leader.statusWrites.Load()
			Eventually(follower.elected, timeout, interval).Should(BeTrue())
			setActive(a.key, F)
			a.settled(false, false)
			Eventually(follower.statusWrites.Load, timeout, interval).Should(BeNumerically(">=", 1), "the new leader writes")
			Expect(leader.statusWrites.Load()).To(Equal(leaderWrites), "the old leader wrote nothing after it stopped")
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false}))
		})
	})

	Describe("scale", func() {
		BeforeEach(start)

		It("converges 50 sessions toggled concurrently, with no duplicate plan/mode", func() {
			const n = 50
			agents := make([]*agent, n)
			for i := range agents {
				agents[i] = newSession(ns, fmt.Sprintf("s%02d", i), nil, nil, be().agentStore)
			}
			for _, a := range agents {
				a.settled(false, false)
			}
			// Half of them are inside a turn: their selection waits for the boundary.
			for i := 0; i < n; i += 2 {
				agents[i].startTurn(1)
			}
			before := stableWrites(&mgr.statusWrites)
			var wg sync.WaitGroup
			for _, a := range agents {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					setActive(a.key, T)
				}()
			}
			wg.Wait()
			for i, a := range agents {
				a.settled(i%2 == 1, i%2 == 0)
			}
			for i := 0; i < n; i += 2 {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					Expect(agents[i].boundary(1, 1).committed).To(BeTrue())
				}()
			}
			wg.Wait()
			for _, a := range agents {
				a.settled(true, false)
				Expect(a.planModes()).To(HaveLen(1), a.sid)
			}
			// One write per between-turns toggle; pending + ack per in-turn toggle.
			expectWrites(&mgr.statusWrites, before+n/2+n, "one write per between-turns toggle, two per in-turn toggle")
			Expect(mgr.store.appends.Load()).To(BeEquivalentTo(n))
		})
	})

	Describe("conditions", func() {
		It("reports a missing PlanModeConfig and holds an entry until it exists", func() {
			ns = newNamespace(false)
			startManager(ns, be().mgrStore, managerOptions{})
			a := newSession(ns, "nocfg", T, nil, be().agentStore)
			Eventually(func(g Gomega) {
				as := a.get()
				g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonConfigMissing))
				g.Expect(as.Status.PlanMode.Pending).To(BeTrue())
			}, timeout, interval).Should(Succeed())
			Expect(a.planModes()).To(BeEmpty())
			createConfig(ns, agentsv1alpha1.DefaultPlanModeConfigName)
			as := a.settled(true, false)
			Expect(readyReason(as)).To(Equal("True/InSync"))
			Expect(as.Status.PlanMode.Config).NotTo(BeNil())
			Expect(as.Status.PlanMode.Config.Name).To(Equal("default"))
			Expect(as.Status.PlanMode.Config.SectionSHA256).To(HaveLen(64))
		})
	})
}

var _ = Describe("AgentSession reconciler when the PostgreSQL server stops", func() {
	It("fails the waiting proposal, keeps the selection pending and says why", func() {
		srv, err := pgtest.Start(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Stop)
		url, err := srv.CreateDatabase(suiteCtx, "stopping")
		Expect(err).NotTo(HaveOccurred())
		mgrStore, err := sessionlog.Open(suiteCtx, url)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgrStore.Close)
		agentStore, err := sessionlog.Open(suiteCtx, url)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(agentStore.Close)

		ns := newNamespace(true)
		startManager(ns, mgrStore, managerOptions{})
		a := newSession(ns, "pgstop", nil, nil, agentStore)
		a.settled(false, false)
		a.startTurn(1)
		a.boundary(1, 1)
		a.endStep(1, 1)
		setActive(a.key, ptr.To(true))
		a.settled(false, true)
		seq := a.tail().NextSeq

		Expect(srv.Stop()).To(Succeed()) // the real server goes away
		a.report(1, 2, seq)
		ack := a.awaitAck(1, 2, seq)
		Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
		Expect(ack.Message).To(ContainSubstring("log store"))
		Expect(ack.Message).To(ContainSubstring("stays pending"))
		Eventually(func(g Gomega) {
			as := a.get()
			g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonLogStoreError))
			g.Expect(as.Status.PlanMode.Pending).To(BeTrue())
			g.Expect(as.Status.PlanMode.Active).To(BeFalse())
		}, timeout, interval).Should(Succeed())
		Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonLogStoreError))
	})
})
