package agentsdk_test

import (
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
)

var _ = Describe("the agent liveness Lease", func() {
	It("is created for the session, holds the agent's duration, and is released on Stop", func() {
		ns := newNamespace()
		l, err := agentsdk.StartLease(suiteCtx, cfg, ns, "demo", logr.Discard())
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Name()).To(Equal("agentsession-demo"))
		key := types.NamespacedName{Namespace: ns, Name: "agentsession-demo"}
		var lease coordinationv1.Lease
		Eventually(func() error { return k8s.Get(suiteCtx, key, &lease) }).WithTimeout(10 * time.Second).Should(Succeed())
		Expect(lease.Labels).To(HaveKeyWithValue(v1alpha1.AgentLeaseSessionLabel, "demo"))
		Expect(lease.Spec.LeaseDurationSeconds).To(HaveValue(BeEquivalentTo(v1alpha1.AgentLeaseDuration / time.Second)))
		Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		Expect(lease.Spec.RenewTime.Time).To(BeTemporally("~", time.Now(), 10*time.Second))

		By("a second process of the session's agent takes the Lease over; the first one's Stop leaves it")
		l2, err := agentsdk.StartLease(suiteCtx, cfg, ns, "demo", logr.Discard())
		Expect(err).NotTo(HaveOccurred())
		first := *lease.Spec.HolderIdentity
		Eventually(func() string {
			Expect(k8s.Get(suiteCtx, key, &lease)).To(Succeed())
			return *lease.Spec.HolderIdentity
		}).WithTimeout(10 * time.Second).ShouldNot(Equal(first))
		l.Stop()
		Expect(k8s.Get(suiteCtx, key, &lease)).To(Succeed(), "held by the second process")

		l2.Stop()
		Expect(apierrors.IsNotFound(k8s.Get(suiteCtx, key, &lease))).To(BeTrue(), "released when its holder stops")
	})
})
