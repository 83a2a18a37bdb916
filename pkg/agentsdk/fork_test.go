package agentsdk_test

import (
	"encoding/json"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// parentLog writes a parent session's log of one completed turn (events inside it), owned by
// the AgentSession ns/name as its agent would have claimed it, and creates the AgentSession
// childNS/childName forking it; it returns the two session ids.
func parentLog(ns, name, childNS, childName string, inside ...harness.Event) (parent, child string) {
	GinkgoHelper()
	parent, child = "p-"+agentsdk.NewID(), "c-"+agentsdk.NewID()
	evs := append(append([]harness.Event{agentsdk.TurnStart(1)}, inside...), agentsdk.TurnEnd(1, harness.TurnCompleted))
	_, err := store.Append(suiteCtx, parent, harness.Sequence(0, evs...))
	Expect(err).NotTo(HaveOccurred())
	_, err = store.ClaimOwner(suiteCtx, parent, sessionlog.Owner{Namespace: ns, Name: name, UID: "uid-" + name})
	Expect(err).NotTo(HaveOccurred())
	// No manager answers this session (no ack label): only the agent can seed it.
	Expect(k8s.Create(suiteCtx, &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: childNS, Name: childName},
		Spec:       v1alpha1.AgentSessionSpec{SessionID: child, Fork: &v1alpha1.ForkSource{SessionID: parent}},
	})).To(Succeed())
	return parent, child
}

var _ = Describe("a forked session", func() {
	It("is seeded from its parent by the agent when the agent starts before the manager's first reconcile", func() {
		ns := newNamespace()
		parent, child := parentLog(ns, "parent", ns, "child", harness.Event{Type: harness.TypePlanMode, Data: json.RawMessage(`{"active":true}`)})
		agent, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: ns, Name: "child", Store: store, SyncTimeout: 20 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(agent.Close)

		info, err := store.Info(suiteCtx, child)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.ParentSession).To(Equal(parent))
		Expect(info.SeedLength).To(BeEquivalentTo(3))
		turn, err := agent.StartTurn(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		Expect(turn).To(BeEquivalentTo(2), "the parent's turns are the child's")
		t, err := store.Tail(suiteCtx, child)
		Expect(err).NotTo(HaveOccurred())
		Expect(t.Active).To(BeTrue(), "the inherited plan state")

		// A second agent process (a restart) finds the fork done and seeds nothing.
		again, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: ns, Name: "child", Store: store, SyncTimeout: 20 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		again.Close()
		t2, err := store.Tail(suiteCtx, child)
		Expect(err).NotTo(HaveOccurred())
		Expect(t2.NextSeq).To(Equal(t.NextSeq))
	})

	It("is refused, and the agent does not start, when the parent's log belongs to another namespace (deleted parent or live)", func() {
		victim, thief := newNamespace(), newNamespace()
		_, child := parentLog(victim, "s1", thief, "copy", agentsdk.UserText("team a's secret prompt"))
		_, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: thief, Name: "copy", Store: store, SyncTimeout: 20 * time.Second})
		var refused *sessionlog.OwnershipError
		Expect(errors.As(err, &refused)).To(BeTrue(), "error: %v", err)
		Expect(refused.Refusal).To(Equal(sessionlog.RefusedParentOfAnotherNamespace))
		_, err = store.Info(suiteCtx, child)
		Expect(errors.Is(err, sessionlog.ErrNotFound)).To(BeTrue(), "nothing of the parent was copied: %v", err)
	})
})
