package agentsdk_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

var _ = Describe("a log store that is not the session's", func() {
	It("refuses to start on another store or on a log that ends before the recorded position, and starts once adopted", func() {
		ns := newNamespace()
		sid := "s-" + agentsdk.NewID()
		id, err := store.Identity(suiteCtx)
		Expect(err).NotTo(HaveOccurred())
		_, err = store.Append(suiteCtx, sid, []harness.Event{harness.PlanModeEvent(0, true)})
		Expect(err).NotTo(HaveOccurred())

		as := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}, Spec: v1alpha1.AgentSessionSpec{SessionID: sid}}
		Expect(k8s.Create(suiteCtx, as)).To(Succeed())
		record := func(storeID string, next int64) {
			GinkgoHelper()
			as.Status.PlanMode.StoreID, as.Status.PlanMode.NextSeq, as.Status.PlanMode.Active = storeID, next, true
			Expect(k8s.Status().Update(suiteCtx, as)).To(Succeed())
		}
		start := func() error {
			c, err := agentsdk.New(suiteCtx, agentsdk.Options{Config: cfg, Namespace: ns, Name: "agent", Store: store})
			if err == nil {
				c.Close()
			}
			return err
		}
		var mismatch *agentsdk.LogStoreMismatchError

		By("a status recorded against another store")
		record("0123456789abcdef0123456789abcdef", 1)
		err = start()
		Expect(errors.As(err, &mismatch)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("recorded against store 0123456789abcdef0123456789abcdef"))

		By("a status recorded beyond the log's end (an emptied store, an older backup)")
		record(id, 7)
		err = start()
		Expect(errors.As(err, &mismatch)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("ends at seq 1 in the log store, before seq 7"))

		By("the same store at or past the recorded position")
		record(id, 1)
		Expect(start()).To(Succeed())

		By("the store adopted at its end")
		record(id, 7)
		as.Annotations = map[string]string{v1alpha1.AnnotationAdoptLogStore: v1alpha1.AdoptLogStoreValue(id, 1)}
		Expect(k8s.Update(suiteCtx, as)).To(Succeed())
		Expect(start()).To(Succeed())
	})
})
