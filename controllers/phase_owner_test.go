package controllers

import (
	"fmt"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// One log per session: an AgentSession in another namespace that names a session ID already
// in use never reads or writes that log. Each namespace has its own manager on the same store
// (as shards would), so the refusal comes from the store's owner record, not from one cache.
var _ = Describe("one log per session", func() {
	for _, name := range []string{"sqlite", "postgres"} {
		It("claims the logs of the sessions it finds at start in one batch, and refuses one another session holds, with the "+name+" log store", func() {
			be := backends[name]
			ns, other := newNamespace(true), newNamespace(true)
			// A log another tenant's session holds already.
			taken := "taken-" + rand.String(8)
			_, err := be.agentStore.ClaimOwner(suiteCtx, taken, sessionlog.Owner{Namespace: other, Name: "s", UID: "uid-other"})
			Expect(err).NotTo(HaveOccurred())
			// Sessions created before any manager watches their namespace.
			fresh := make([]*agent, 0, 3)
			for i := range 3 {
				fresh = append(fresh, newSession(ns, fmt.Sprintf("fresh-%d", i), nil, nil, be.agentStore))
			}
			intruder := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intruder"},
				Spec: agentsv1alpha1.AgentSessionSpec{SessionID: taken}}
			Expect(k8sClient.Create(suiteCtx, intruder)).To(Succeed())

			tm := startManager(ns, be.mgrStore, managerOptions{})
			for _, a := range fresh {
				a.awaitStatus(false, false)
				holder, ok, err := be.agentStore.OwnerOf(suiteCtx, a.sid)
				Expect(err).NotTo(HaveOccurred())
				Expect(ok).To(BeTrue())
				Expect(holder).To(Equal(sessionlog.Owner{Namespace: ns, Name: a.key.Name, UID: string(a.get().UID)}))
			}
			Eventually(func(g Gomega) {
				var as agentsv1alpha1.AgentSession
				g.Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(intruder), &as)).To(Succeed())
				g.Expect(readyReason(&as)).To(Equal("False/" + agentsv1alpha1.ReasonSessionIDInUse))
			}, timeout, interval).Should(Succeed())
			Expect(tm.store.batches.Load()).To(Equal(int64(1)), "one batch at start")
			Expect(tm.store.batchClaims.Load()).To(Equal(int64(3)), "the three unclaimed logs, not the one another session holds")
			for _, a := range fresh {
				Expect(tm.store.claimedAlone(a.sid)).To(BeZero(), "a log claimed in the batch is not claimed again")
			}
			Expect(tm.store.claimedAlone(taken)).To(BeNumerically(">=", 1), "the log another session holds is claimed alone, and refused")
			holder, _, err := be.agentStore.OwnerOf(suiteCtx, taken)
			Expect(err).NotTo(HaveOccurred())
			Expect(holder.Namespace).To(Equal(other), "the other tenant keeps its log")
		})

		It("refuses a second AgentSession naming a taken spec.sessionID, with the "+name+" log store", func() {
			be := backends[name]
			nsA, nsB := newNamespace(true), newNamespace(true)
			startManager(nsA, be.mgrStore, managerOptions{})
			startManager(nsB, be.mgrStore, managerOptions{})

			sid := "shared-" + rand.String(8)
			create := func(ns string, active *bool) *agent {
				GinkgoHelper()
				as := &agentsv1alpha1.AgentSession{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
					Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: sid, PlanMode: agentsv1alpha1.PlanModeSpec{Active: active}},
				}
				Expect(k8sClient.Create(suiteCtx, as)).To(Succeed())
				return &agent{store: be.agentStore, key: client.ObjectKeyFromObject(as), sid: sid}
			}
			owner := create(nsA, nil)
			owner.awaitStatus(false, false)

			// team-b names team-a's log and selects plan mode: nothing reaches the log.
			intruder := create(nsB, ptr.To(true))
			Eventually(func(g Gomega) {
				as := intruder.get()
				g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonSessionIDInUse))
				stalled := meta.FindStatusCondition(as.Status.Conditions, agentsv1alpha1.ConditionStalled)
				g.Expect(stalled).NotTo(BeNil())
				g.Expect(stalled.Message).To(ContainSubstring(`spec.sessionID "` + sid + `" is the log of another AgentSession`))
				g.Expect(stalled.Message).To(ContainSubstring("create it with a session ID of its own"))
				g.Expect(stalled.Message).NotTo(ContainSubstring(nsA), "the owner's namespace is not shown to another tenant")
			}, timeout, interval).Should(Succeed())
			Expect(owner.planModes()).To(BeEmpty(), "the second session appended to the first one's log")
			// Events trail status writes while reconciles are in flight (the reconciler's Event queue).
			Eventually(func() []string { return eventReasons(intruder.key) }, timeout, interval).Should(ContainElement("Warning/" + agentsv1alpha1.ReasonSessionIDInUse))

			// Its agent, waiting at a boundary, is answered Failed at once.
			intruder.report(1, 1, 0)
			ack := intruder.awaitAck(1, 1, 0)
			Expect(ack.Result).To(Equal(agentsv1alpha1.BoundaryFailed))
			Expect(ack.Reason).To(Equal(agentsv1alpha1.ReasonSessionIDInUse))
			Expect(owner.planModes()).To(BeEmpty())

			// The owner is unaffected.
			setActive(owner.key, ptr.To(true))
			owner.awaitStatus(true, false)
			Expect(activeValues(owner.planModes())).To(Equal([]bool{true}))

			// Deleted and created again under its name (a GitOps re-apply), the owner keeps its log.
			Expect(k8sClient.Delete(suiteCtx, owner.get())).To(Succeed())
			Eventually(func() error {
				return k8sClient.Get(suiteCtx, owner.key, &agentsv1alpha1.AgentSession{})
			}, timeout, interval).ShouldNot(Succeed())
			again := create(nsA, ptr.To(false))
			again.awaitStatus(false, false)
			Expect(readyReason(again.get())).To(Equal("True/" + agentsv1alpha1.ReasonInSync))
			Expect(activeValues(again.planModes())).To(Equal([]bool{true, false}))
			holder, err := be.agentStore.ClaimOwner(suiteCtx, sid, sessionlog.Owner{Namespace: nsB, Name: "s", UID: "probe"})
			Expect(err).NotTo(HaveOccurred())
			Expect(holder.Namespace).To(Equal(nsA))
			Expect(holder.UID).To(Equal(string(again.get().UID)))
		})
	}
})

func TestSessionMemory(t *testing.T) {
	var m sessionMemory
	key := types.NamespacedName{Namespace: "team-a", Name: "s"}
	if m.claimed(key, "uid-1", "sid-1") {
		t.Fatal("a session with no claim recorded has one")
	}
	m.recordClaim(key, "uid-1", "sid-1")
	if !m.claimed(key, "uid-1", "sid-1") {
		t.Fatal("the claim just recorded is not there")
	}
	for _, o := range []struct {
		uid types.UID
		sid string
	}{{"uid-2", "sid-1"}, {"uid-1", "sid-2"}, {"uid-1sid", "-1"}} {
		if m.claimed(key, o.uid, o.sid) {
			t.Errorf("the claim of (uid-1, sid-1) is taken for (%s, %s)", o.uid, o.sid)
		}
	}
	// The two digests share an entry, not a meaning: a claim is no status and a status no claim.
	if _, ok := m.status(key); ok {
		t.Fatal("recording a claim made a status remembered")
	}
	other := types.NamespacedName{Namespace: "team-a", Name: "t"}
	first, second := statusDigest{1}, statusDigest{2}
	m.rememberStatus(other, statusDigest{}, true)
	if d, ok := m.status(other); !ok || d != (statusDigest{}) {
		t.Fatalf("a zero digest remembered reads back as %x, %v", d, ok)
	}
	if m.claimed(other, "", "") {
		t.Fatal("remembering a status made a claim recorded")
	}
	m.rememberStatus(key, first, true)
	m.rememberStatus(key, second, true)
	if d, _ := m.status(key); d != first {
		t.Fatalf("a status checked over a remembered one replaced it: %x", d)
	}
	m.rememberStatus(key, second, false)
	if d, _ := m.status(key); d != second {
		t.Fatalf("a status written did not replace the remembered one: %x", d)
	}
	if !m.claimed(key, "uid-1", "sid-1") {
		t.Fatal("remembering a status dropped the claim")
	}
	m.forget(key)
	if _, ok := m.status(key); ok || m.claimed(key, "uid-1", "sid-1") {
		t.Fatal("a forgotten session still has its claim or status")
	}
	if _, ok := m.status(other); !ok {
		t.Fatal("forgetting one session dropped another's status")
	}
}
