package controllers

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// crashSafetySpecs: crashes, lost and stale status writes, restarts and leader election
// (status_patcher.go, recoverUnrecorded in phase_log.go).
func crashSafetySpecs(fx *specFixture) {
	Describe("crash safety", func() {
		It("stores plan mode off on a session that never had it on (kubectl get's Plan-Mode column)", func() {
			fx.start()
			a := newSession(fx.ns, "fresh", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(agentsv1alpha1.AgentSessionKind)
			Expect(k8sClient.Get(suiteCtx, a.key, u)).To(Succeed())
			for _, field := range []string{"active", "pending"} {
				v, found, err := unstructured.NestedBool(u.Object, "status", "planMode", field)
				Expect(err).NotTo(HaveOccurred())
				Expect(found).To(BeTrue(), "status.planMode.%s is stored", field)
				Expect(v).To(BeFalse(), "status.planMode.%s", field)
			}
		})

		It("remembers after each write exactly the manager-owned status the API server stores", func() {
			// The digest is taken of the status sent, not of the write's answer: it must be
			// the stored one's, or each later reconcile reads the session past the cache.
			fx.start()
			a := newSession(fx.ns, "stored", nil, nil, fx.be().agentStore)
			remembersStored := func(what string) {
				GinkgoHelper()
				Eventually(func(g Gomega) {
					live := a.get()
					g.Expect(fx.mgr.r.patcher().unchangedSince(a.key, &live.Status)).To(BeTrue(), "%s: %+v", what, live.Status.PlanMode)
				}, timeout, interval).Should(Succeed())
			}
			a.awaitStatus(false, false)
			remembersStored("taken on")
			a.startTurn(1)
			a.boundary(1, 1)
			a.endStep(1, 1)
			setActive(a.key, T)
			a.awaitStatus(false, true)
			remembersStored("pending")
			r := a.boundary(1, 2)
			Expect(r.notice).To(Equal(harness.NoticePlanOn))
			remembersStored("answered with a notice")
			a.endStep(1, 2)
			a.endTurn("completed")
			setActive(a.key, F)
			a.awaitStatus(false, false)
			remembersStored("committed between turns, a notice owed")
			Expect(a.get().Status.PlanMode.Notice).NotTo(BeNil(), "the owed notice is stored")
		})

		It("does not append again after a crash between the append and the status write (between turns)", func() {
			fx.ns = newNamespace(true)
			m1 := startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			a := newSession(fx.ns, "crash", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			a.startTurn(1)
			a.boundary(1, 1) // header told F
			a.endStep(1, 1)
			a.endTurn("completed")
			m1.stop()

			// The toggle is processed by a reconciler that appends and then dies before its
			// status write: run its compute step alone and drop the result.
			setActive(a.key, T)
			r := &AgentSessionReconciler{Client: k8sClient, Store: fx.be().mgrStore}
			out, err := r.compute(suiteCtx, a.get())
			Expect(err).NotTo(HaveOccurred())
			Expect(out.changed).To(BeTrue())
			Expect(a.planModes()).To(HaveLen(1))
			Expect(a.get().Status.PlanMode.Active).To(BeFalse(), "no status was written")

			m2 := startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			as := a.awaitStatus(true, false)
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(Equal(1), "no duplicate plan/mode")
			Expect(as.Status.PlanMode.Notice).NotTo(BeNil(), "the owed notice is recovered from the log")
			Expect(as.Status.PlanMode.Notice.Text).To(Equal(harness.NoticePlanOn))
			Expect(m2.store.appends.Load()).To(BeZero())

			a.startTurn(2)
			Expect(a.boundary(2, 1).notice).To(Equal(harness.NoticePlanOn))
		})

		It("does not append again after a crash between the boundary append and the acknowledgement", func() {
			fx.ns = newNamespace(true)
			m1 := startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			a := pendingInTurn(fx.ns, "crashb", fx.be().agentStore)
			m1.stop()

			seq := a.tail().NextSeq
			a.report(1, 2, seq)
			r := &AgentSessionReconciler{Client: k8sClient, Store: fx.be().mgrStore}
			_, err := r.compute(suiteCtx, a.get())
			Expect(err).NotTo(HaveOccurred())
			Expect(a.seqOf(harness.TypePlanMode)).To(Equal([]int64{seq}))

			m2 := startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			ack := a.awaitAck(1, 2, seq)
			Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryAdmitted))
			Expect(ack.Active).To(BeTrue())
			Expect(ack.NextSeq).To(Equal(seq + 1))
			Expect(ack.Notice).To(Equal(harness.NoticePlanOn), "the narration is recomputed, not lost")
			a.awaitStatus(true, false)
			Expect(m2.store.appends.Load()).To(BeZero())
			Expect(a.planModes()).To(HaveLen(1))
		})

		It("recovers from a lost status write without a duplicate append", func() {
			fx.start()
			a := newSession(fx.ns, "lost", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			fx.mgr.failStatus.Store(1)
			setActive(a.key, T)
			a.awaitStatus(true, false)
			Expect(fx.mgr.failStatus.Load()).To(BeZero(), "the injected failure was hit")
			Consistently(func() int { return len(a.planModes()) }, quiet, interval).Should(Equal(1))
		})

		It("refuses a status computed from a stale read, but not because the agent wrote status.agent", func() {
			fx.start()
			a := newSession(fx.ns, "stale", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			stale := a.get()
			setActive(a.key, T)
			a.awaitStatus(true, false)
			fx.mgr.stop()

			r := &AgentSessionReconciler{Client: k8sClient, Store: fx.be().mgrStore}
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
			r2 := &AgentSessionReconciler{Client: k8sClient, Store: fx.be().mgrStore}
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
			fx.start()
			a := newSession(fx.ns, "forget", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			held := func() bool { _, ok := fx.mgr.r.patcher().remembered(a.key); return ok }
			// The write is visible before the reconciler has recorded it: wait for the record.
			Eventually(held, timeout, interval).Should(BeTrue(), "the manager holds its last write of the session")
			Expect(k8sClient.Delete(suiteCtx, a.get())).To(Succeed())
			Eventually(held, timeout, interval).Should(BeFalse(), "forgotten once the session is gone")
		})

		It("applies a selection made while the manager is down when it returns", func() {
			fx.ns = newNamespace(true)
			m1 := startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			a := newSession(fx.ns, "down", nil, nil, fx.be().agentStore)
			b := newSession(fx.ns, "down-open", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			b.awaitStatus(false, false)
			b.startTurn(1)
			m1.stop()
			setActive(a.key, T)
			setActive(b.key, T)
			Consistently(func() bool { return a.get().Status.PlanMode.Active }, quiet, interval).Should(BeFalse())
			startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			a.awaitStatus(true, false)
			b.awaitStatus(false, true)
			Expect(b.boundary(1, 1).committed).To(BeTrue())
		})

		It("writes only from the leader when two managers run with leader election", func() {
			fx.ns = newNamespace(true)
			id := "planmode-" + fx.ns
			m1 := startManager(fx.ns, fx.be().mgrStore, managerOptions{leaderElectionID: id})
			m2 := startManager(fx.ns, fx.be().mgrStore, managerOptions{leaderElectionID: id})
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

			a := newSession(fx.ns, "le", nil, nil, fx.be().agentStore)
			a.awaitStatus(false, false)
			setActive(a.key, T)
			a.awaitStatus(true, false)
			Consistently(follower.statusWrites.Load, quiet, interval).Should(BeZero(), "the follower never writes")
			Eventually(leader.statusWrites.Load, timeout, interval).Should(BeNumerically(">=", 2))
			Expect(follower.store.appends.Load()).To(BeZero())

			leader.stop() // releases the lease
			leaderWrites := leader.statusWrites.Load()
			Eventually(follower.elected, timeout, interval).Should(BeTrue())
			setActive(a.key, F)
			a.awaitStatus(false, false)
			Eventually(follower.statusWrites.Load, timeout, interval).Should(BeNumerically(">=", 1), "the new leader writes")
			Expect(leader.statusWrites.Load()).To(Equal(leaderWrites), "the old leader wrote nothing after it stopped")
			Expect(activeValues(a.planModes())).To(Equal([]bool{true, false}))
		})
	})
}

// The status patch always carries planMode.active and .pending, keeps every other value as the
// diff made it (an agent's seq at the top of int64, beyond float64's exact range, too), and
// never names status.agent.
func TestStatusPatchCarriesPlanModeAndTheDiff(t *testing.T) {
	basis := agentsv1alpha1.AgentSessionStatus{Agent: &agentsv1alpha1.AgentReport{SteerID: "m1"}}
	status := basis
	status.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 2, Seq: math.MaxInt64}
	data := mustStatusPatch(t, &basis, &status, "")
	var got struct {
		Metadata *struct{}
		Status   struct {
			Agent    *struct{}
			PlanMode struct {
				Active, Pending *bool
				LastBoundary    struct{ Seq int64 }
			}
		}
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	pm := got.Status.PlanMode
	if pm.Active == nil || *pm.Active || pm.Pending == nil || *pm.Pending {
		t.Errorf("planMode.active and .pending not carried as false: %s", data)
	}
	if pm.LastBoundary.Seq != math.MaxInt64 {
		t.Errorf("seq = %d, want %d: %s", pm.LastBoundary.Seq, int64(math.MaxInt64), data)
	}
	if got.Status.Agent != nil || got.Metadata != nil {
		t.Errorf("the patch names status.agent or metadata: %s", data)
	}
}

// Applied to the stored object, the patch leaves exactly the computed manager-owned status
// (removed fields removed) and the stored status.agent, and carries the precondition it is
// given.
func TestStatusPatchAppliedGivesTheComputedStatus(t *testing.T) {
	stored := answeredStatus()
	status := answeredStatus()
	status.Agent = nil
	status.PlanMode.LastBoundary.Notice = "" // v5: dropped once the step started
	status.PlanMode.Config = nil
	status.PlanMode.Changes = []agentsv1alpha1.PlanModeChange{{Seq: 41, Active: true, Cause: agentsv1alpha1.PlanModeChangeSelection}}
	data := mustStatusPatch(t, &stored, &status, "123")

	doc, err := json.Marshal(map[string]any{"metadata": map[string]any{"name": "s", "resourceVersion": "123"}, "status": stored})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := jsonpatch.MergePatch(doc, data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var got struct {
		Metadata struct{ ResourceVersion string }
		Status   agentsv1alpha1.AgentSessionStatus
	}
	if err := json.Unmarshal(applied, &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.ResourceVersion != "123" {
		t.Errorf("precondition %q, want 123: %s", got.Metadata.ResourceVersion, data)
	}
	if digestStatus(&got.Status) != digestStatus(&status) {
		t.Errorf("the patched status differs from the computed one:\npatch %s\ngot   %s", data, applied)
	}
	if !reflect.DeepEqual(got.Status.Agent, stored.Agent) {
		t.Errorf("status.agent changed: %+v", got.Status.Agent)
	}
}

func mustStatusPatch(t *testing.T, basis, status *agentsv1alpha1.AgentSessionStatus, precondition string) []byte {
	t.Helper()
	owned, err := ownedJSON(status)
	if err != nil {
		t.Fatal(err)
	}
	data, err := statusPatch(basis, status, owned, precondition)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// answeredStatus is a session's status after the manager answered a boundary, as a storm
// leaves most sessions: conditions, the config in force, the answer and the agent's report.
func answeredStatus() agentsv1alpha1.AgentSessionStatus {
	t, f := true, false
	at := metav1.NewTime(time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC))
	return agentsv1alpha1.AgentSessionStatus{
		ObservedGeneration: 3,
		Conditions: []metav1.Condition{
			{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "InSync", Message: "plan mode is on", ObservedGeneration: 3, LastTransitionTime: at},
		},
		PlanMode: agentsv1alpha1.PlanModeStatus{
			Active: true, Selection: &t, NextSeq: 42, StoreID: "store", TurnOpen: true, ToldActive: &f,
			Config:             &agentsv1alpha1.ConfigInForce{Name: "default", Generation: 1, SectionSHA256: "0123456789abcdef"},
			LastTransitionTime: &at,
			LastBoundary: &agentsv1alpha1.BoundaryAck{Turn: 2, Step: 3, Seq: 41, Result: agentsv1alpha1.BoundaryAdmitted,
				Active: true, NextSeq: 42, Notice: harness.NoticePlanOn, Time: at},
		},
		Agent: &agentsv1alpha1.AgentReport{Boundary: &agentsv1alpha1.StepBoundary{Turn: 2, Step: 3, Seq: 41}},
	}
}

func TestWriteDueMasksTheLogMirrorWithoutTouchingEitherStatus(t *testing.T) {
	stored, computed := answeredStatus(), answeredStatus()
	computed.PlanMode.NextSeq, computed.PlanMode.TurnOpen, computed.PlanMode.ToldActive = 50, false, nil
	if writeDue(stored, computed) {
		t.Fatal("a write is due for the log's position alone")
	}
	if stored.PlanMode.ToldActive == nil || stored.PlanMode.NextSeq != 42 || !stored.PlanMode.TurnOpen {
		t.Fatalf("writeDue changed the stored status: %+v", stored.PlanMode)
	}
	computed.PlanMode.LastBoundary = &agentsv1alpha1.BoundaryAck{}
	*computed.PlanMode.LastBoundary = *stored.PlanMode.LastBoundary
	computed.PlanMode.LastBoundary.Notice = ""
	if !writeDue(stored, computed) {
		t.Fatal("no write due for a changed answer")
	}
}

// The same instants in another time zone (a status the manager built against one decoded from
// the API server) are the same status: no write is due.
func TestWriteDueComparesInstantsNotTheirZones(t *testing.T) {
	stored, computed := answeredStatus(), answeredStatus()
	east := time.FixedZone("UTC+9", 9*60*60)
	local := metav1.NewTime(stored.PlanMode.LastTransitionTime.In(east))
	computed.PlanMode.LastTransitionTime = &local
	computed.Conditions[0].LastTransitionTime = local
	if reflect.DeepEqual(stored, computed) {
		t.Fatal("the test's statuses are equal field for field; it checks nothing")
	}
	if writeDue(stored, computed) {
		t.Fatal("a write is due for the time zone of an unchanged instant")
	}
	later := metav1.NewTime(local.Add(time.Second))
	computed.PlanMode.LastTransitionTime = &later
	if !writeDue(stored, computed) {
		t.Fatal("no write due for a changed transition time")
	}
}

// BenchmarkWriteDue: the comparison every computed reconcile makes (a restart makes one per
// session).
func BenchmarkWriteDue(b *testing.B) {
	stored, computed := answeredStatus(), answeredStatus()
	b.ReportAllocs()
	for b.Loop() {
		if writeDue(stored, computed) {
			b.Fatal("equal statuses differ")
		}
	}
}
