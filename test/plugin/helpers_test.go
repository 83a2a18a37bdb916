package plugin_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

func bp(b bool) *bool { return &b }

// newNamespace creates a fresh namespace for one spec.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plugin-" + rand.String(6)}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// newSession creates an AgentSession, then sets its status (as the manager and agent would).
//
//nolint:unparam // every spec names its session "demo"; the name reads at the call, beside the kubectl plan arguments naming it
func newSession(ns, name string, spec func(*agentsv1alpha1.AgentSessionSpec), status func(*agentsv1alpha1.AgentSessionStatus)) *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	as := &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: name + "-" + rand.String(5)},
	}
	if spec != nil {
		spec(&as.Spec)
	}
	Expect(k8sClient.Create(ctx, as)).To(Succeed())
	if status != nil {
		status(&as.Status)
		Expect(k8sClient.Status().Update(ctx, as)).To(Succeed())
	}
	return get(ns, name)
}

func get(ns, name string) *agentsv1alpha1.AgentSession {
	GinkgoHelper()
	as := &agentsv1alpha1.AgentSession{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, as)).To(Succeed())
	return as
}

func setStatus(ns, name string, f func(*agentsv1alpha1.AgentSessionStatus)) {
	GinkgoHelper()
	as := get(ns, name)
	f(&as.Status)
	Expect(k8sClient.Status().Update(ctx, as)).To(Succeed())
}

func line(s string) string { return s + "\n" }
