package controllers

import (
	"context"
	"fmt"
	"sort"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

var _ = Describe("a config or store change", func() {
	It("reconciles the cached sessions it concerns, read from the cache without copying each", func() {
		ns := newNamespace(true)
		// A cluster-wide cache, as the deployed manager's (a namespaced cache hands out no
		// store of its own); it reconciles nothing.
		c, err := cache.New(cfg, cache.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(suiteCtx)
		DeferCleanup(cancel)
		go func() { _ = c.Start(ctx) }()
		_, err = c.GetInformer(ctx, &agentsv1alpha1.AgentSession{})
		Expect(err).NotTo(HaveOccurred())
		r := &AgentSessionReconciler{sessions: c}
		const named, others = 40, 20
		var want, wantOther []string
		for i := range named + others {
			s := &agentsv1alpha1.AgentSession{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%02d", i)},
				Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: fmt.Sprintf("%s.s%02d", ns, i)},
			}
			if i < named {
				want = append(want, ns+"/"+s.Name)
			} else {
				s.Spec.PlanMode.ConfigRef = &agentsv1alpha1.ConfigReference{Name: "other"}
				wantOther = append(wantOther, ns+"/"+s.Name)
			}
			Expect(k8sClient.Create(suiteCtx, s)).To(Succeed())
		}
		config := func(ns, name string) *agentsv1alpha1.PlanModeConfig {
			return &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		}
		keys := func(reqs []reconcile.Request) []string {
			out := make([]string, 0, len(reqs))
			for _, r := range reqs {
				out = append(out, r.String())
			}
			sort.Strings(out)
			return out
		}
		inNamespace := func(reqs []reconcile.Request) (n int) {
			for _, r := range reqs {
				if r.Namespace == ns {
					n++
				}
			}
			return n
		}
		Eventually(func() int { return inNamespace(r.allSessions(suiteCtx, nil)) }, timeout, interval).
			Should(Equal(named+others), "every cached session, for a change of the store's identity")
		Expect(keys(r.sessionsForConfig(suiteCtx, config(ns, agentsv1alpha1.DefaultPlanModeConfigName)))).To(Equal(want),
			"the sessions naming no config use the default one")
		Expect(keys(r.sessionsForConfig(suiteCtx, config(ns, "other")))).To(Equal(wantOther))
		Expect(r.sessionsForConfig(suiteCtx, config("elsewhere", agentsv1alpha1.DefaultPlanModeConfigName))).To(BeEmpty(),
			"a config of another namespace concerns none of these sessions")
		Expect(r.sessionsForReviewPolicy(suiteCtx, &agentsv1alpha1.ReviewPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}})).
			To(BeEmpty(), "no session has a plan under review")

		// A copy per session would be an allocation per session at least; the cache's own
		// objects cost a few allocations per walk, however many sessions there are.
		allocs := testing.AllocsPerRun(20, func() {
			r.sessionsForConfig(suiteCtx, config(ns, agentsv1alpha1.DefaultPlanModeConfigName))
		})
		cached := len(r.allSessions(suiteCtx, nil))
		Expect(allocs).To(BeNumerically("<", named/2), "allocations per config event over %d cached sessions", cached)
	})
})
