package controllers

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// selectionSpecs: the user's selection (phase_selection.go) through spec.planMode.active.
func selectionSpecs(fx *specFixture) {
	Describe("the set() decision table through spec.planMode.active (reference 4.5)", func() {
		BeforeEach(fx.start)

		It("commits between turns at once, with exactly one status write per toggle and none when nothing changed", func() {
			a := newSession(fx.ns, "idle", nil, nil, fx.be().agentStore)
			as := a.awaitStatus(false, false)
			Expect(readyReason(as)).To(Equal("True/InSync"))
			expectWrites(&fx.mgr.statusWrites, 1, "the first status of a new session")

			for i, v := range []*bool{T, F, T} {
				before := fx.mgr.statusWrites.Load()
				setActive(a.key, v)
				as = a.awaitStatus(*v, false)
				expectWrites(&fx.mgr.statusWrites, before+1, fmt.Sprintf("toggle %d: one status write", i))
			}
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false, true}))
			Expect(as.Status.PlanMode.NextSeq).To(BeEquivalentTo(3))

			// The same value again is a noop (edge-triggered), and a reconcile with nothing
			// changed writes nothing.
			before := fx.mgr.statusWrites.Load()
			setActive(a.key, T)
			Expect(k8sClient.Get(suiteCtx, a.key, as)).To(Succeed())
			as.Annotations = map[string]string{"touched": "yes"}
			Expect(k8sClient.Update(suiteCtx, as)).To(Succeed())
			expectWrites(&fx.mgr.statusWrites, before, "nothing changed: no write")
			Expect(a.planModes()).To(HaveLen(3))
			Expect(fx.mgr.otherWrites.Load()).To(BeZero(), "the manager writes nothing but status")
			Eventually(func() []string { return eventReasons(a.key) }, timeout, interval).Should(ContainElement("Normal/" + EventReasonCommitted))
		})

		It("names the session in its transition Events without a resourceVersion, so repeats join one series", func() {
			a := newSession(fx.ns, "series", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			for _, v := range []*bool{T, F, T} {
				setActive(a.key, v)
				a.awaitStatus(*v, false)
			}
			uid := a.get().UID
			committed := func(action string) func(Gomega) eventsv1.Event {
				return func(g Gomega) eventsv1.Event {
					var list eventsv1.EventList
					g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(fx.ns))).To(Succeed())
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
				Namespace: fx.ns, Name: a.key.Name, UID: uid}
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
			a := newSession(fx.ns, "split", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			setActive(a.key, T)
			a.awaitStatus(true, false)
			// A second manager with a stale cache appends plan/mode false after the commit (the
			// compare-and-swap passes) and its status write is refused: the log ends with false,
			// the status (the running manager's own write) still says true.
			a.append(harness.PlanModeEvent(0, false))
			Expect(a.tail().Active).To(BeFalse())

			// That second manager reconciles again. The status is not its own write, so it does not
			// take it as settled: it reads the log, and the user's selection is committed again.
			second := &AgentSessionReconciler{Client: k8sClient, Store: fx.be().mgrStore}
			_, err := second.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
			Expect(err).NotTo(HaveOccurred())
			Expect(a.tail().Active).To(BeTrue(), "the selection the log lost is committed again")
			Eventually(func(g Gomega) {
				g.Expect(a.get().Status.PlanMode.Active).To(Equal(a.tail().Active))
			}, timeout, interval).Should(Succeed())
		})

		It("after a restart, reads the store once for every session, then takes an unchanged status as settled", func() {
			a := newSession(fx.ns, "restart", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			setActive(a.key, T)
			before := a.awaitStatus(true, false)

			// A manager that has written nothing yet (just started, or just elected) checks the
			// status against the log once: from its one read of every session's tail and owner,
			// with no claim and no tail read of its own. It matches, so nothing is written.
			store := &faultStore{Store: fx.be().mgrStore}
			restarted := &AgentSessionReconciler{Client: k8sClient, Store: store}
			for i := 0; i < 3; i++ {
				_, err := restarted.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(store.listings.Load()).To(Equal(int64(1)), "one read of every session at start")
			Expect(store.claims.Load()).To(BeZero(), "the owner record read at start names the session")
			Expect(store.tails.Load()).To(BeZero(), "the tail read at start stands for the first reconcile's")
			Expect(a.get().ResourceVersion).To(Equal(before.ResourceVersion), "a status that matches the log is not rewritten")

			// A status it neither wrote nor checked is read against the log again: here the
			// other manager commits a new selection.
			setActive(a.key, F)
			a.awaitStatus(false, false)
			_, err := restarted.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
			Expect(err).NotTo(HaveOccurred())
			Expect(store.tails.Load()).To(Equal(int64(1)), "a status this manager has not checked is read against the log")
			Expect(store.listings.Load()).To(Equal(int64(1)), "the store is read whole once")
		})

		It("after a restart, takes a session whose plan review is closed as settled too", func() {
			a := newSession(fx.ns, "restart-reviewed", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			setActive(a.key, T)
			a.awaitStatus(true, false)
			const plan = "# Fix the flake\n"
			post := fmt.Sprintf(`{"status":{"agent":{"review":{"id":"r1","plan":%q,"turn":0}}}}`, plan)
			Expect(k8sClient.Status().Patch(suiteCtx, a.get(), client.RawPatch(types.MergePatchType, []byte(post)))).To(Succeed())
			Eventually(func() *agentsv1alpha1.ReviewStatus { return a.get().Status.Review }, timeout, interval).
				Should(HaveField("Phase", agentsv1alpha1.ReviewPending))
			vote := fmt.Sprintf(`{"spec":{"reviewVotes":[{"reviewID":"r1","decision":"KeepPlanning","planSHA256":%q,"decidedBy":{"username":"rita"}}]}}`, planmode.PlanSHA256(plan))
			Expect(k8sClient.Patch(suiteCtx, a.get(), client.RawPatch(types.MergePatchType, []byte(vote)))).To(Succeed())
			Eventually(func(g Gomega) {
				s := a.get()
				g.Expect(s.Status.Review).To(HaveField("Phase", agentsv1alpha1.ReviewKeptPlanning))
				g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
			}, timeout, interval).Should(Succeed())
			before := a.get()
			Expect(before.Status.Agent.Review).NotTo(BeNil(), "the post stays with its closed review, as the record")

			// The first reconcile checks the status against the one read at start; the next
			// ones, echoes of anything, find it settled: a closed review leaves nothing to do.
			store := &faultStore{Store: fx.be().mgrStore}
			restarted := &AgentSessionReconciler{Client: k8sClient, Store: store}
			for i := 0; i < 3; i++ {
				_, err := restarted.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
				Expect(err).NotTo(HaveOccurred())
			}
			Expect(store.tails.Load()).To(BeZero(), "a session with a closed review reads its log no more than any other")
			Expect(a.get().ResourceVersion).To(Equal(before.ResourceVersion), "nothing is rewritten")
		})

		It("after a restart, reads the log itself when it moved past the status, and claims a log whose record names another UID", func() {
			a := newSession(fx.ns, "restart-moved", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			b := newSession(fx.ns, "restart-reclaimed", nil, nil, fx.be().agentStore)
			b.awaitStatus(false, false)
			// a's agent opens a turn: the log is past what a's status recorded, and no write is
			// due for it. b's record is rewritten to name another UID of the same session, as a
			// session deleted and created again under its name leaves it.
			a.startTurn(1)
			Expect(a.tail().NextSeq).To(BeNumerically(">", a.get().Status.PlanMode.NextSeq))
			bs := b.get()
			_, err := fx.be().agentStore.ClaimOwner(suiteCtx, bs.Spec.SessionID, sessionlog.Owner{Namespace: bs.Namespace, Name: bs.Name, UID: "earlier-uid"})
			Expect(err).NotTo(HaveOccurred())

			store := &faultStore{Store: fx.be().mgrStore}
			restarted := &AgentSessionReconciler{Client: k8sClient, Store: store}
			_, err = restarted.Reconcile(suiteCtx, ctrl.Request{NamespacedName: a.key})
			Expect(err).NotTo(HaveOccurred())
			Expect(store.tails.Load()).To(Equal(int64(1)), "a log past its status is read, not taken from the start")
			_, err = restarted.Reconcile(suiteCtx, ctrl.Request{NamespacedName: b.key})
			Expect(err).NotTo(HaveOccurred())
			Expect(store.claims.Load()).To(Equal(int64(1)), "only b's log, whose record names another UID, is claimed")
			holder, ok, err := fx.be().agentStore.OwnerOf(suiteCtx, bs.Spec.SessionID)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue())
			Expect(holder.UID).To(Equal(string(bs.UID)), "the claim re-recorded the session's own UID")
			Expect(store.listings.Load()).To(Equal(int64(1)))
		})

		It("queues during an open turn, cancels a reversal without logging, and noops a repeat", func() {
			a := newSession(fx.ns, "open", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)

			setActive(a.key, T) // L=F, open, set(T) -> queued
			as := a.awaitStatus(false, true)
			Expect(as.Status.PlanMode.PendingActive).To(Equal(T))
			Expect(as.Status.PlanMode.PendingSource).To(Equal(agentsv1alpha1.PendingSourceUser))
			Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonSelectionPending))

			setActive(a.key, F) // L=F, P=T, open, set(F) -> cancelled, residue kept
			as = a.awaitStatus(false, false)
			Expect(as.Status.PlanMode.PendingActive).To(Equal(F), "the cancelled residue is kept until a boundary")

			setActive(a.key, T) // L=F, P=F residue, open, set(T) -> queued
			a.awaitStatus(false, true)
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero(), "nothing is logged during the turn")

			// The boundary commits it.
			r := a.boundary(1, 1)
			Expect(r.asked).To(BeTrue())
			Expect(r.committed).To(BeTrue())
			Expect(r.notice).To(BeEmpty(), "no header yet: nothing to narrate")
			a.awaitStatus(true, false)
			Expect(activeValues(a.planModes())).To(Equal([]bool{true}))

			// L=T open set(F) -> queued exit after the turn's final boundary: the turn ends and
			// it stays pending (the newest plan document); a later turn's boundary appends it.
			setActive(a.key, F)
			a.awaitStatus(true, true)
			a.endStep(1, 1)
			a.endTurn("completed")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(Equal(1), "nothing is appended at turn/end")
			a.startTurn(2)
			r = a.boundary(2, 1)
			Expect(r.asked).To(BeTrue())
			Expect(r.committed).To(BeFalse())
			Expect(r.notice).To(Equal(harness.NoticeDefault), "the last header told plan mode")
			a.awaitStatus(false, false)
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false}))
		})

		It("cancels between turns a selection that returns to the logged state", func() {
			a := newSession(fx.ns, "cancel", F, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)
			setActive(a.key, T)
			a.awaitStatus(false, true)
			// Reverted while the turn is still open, then the turn ends: nothing is logged.
			setActive(a.key, F)
			a.awaitStatus(false, false)
			a.endTurn("completed")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(BeZero())
			Expect(a.get().Status.PlanMode.Pending).To(BeFalse())
		})
	})
}
