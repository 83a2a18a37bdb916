package controllers

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// conditionsSpecs: the conditions a failure becomes (conditions.go).
func conditionsSpecs(fx *specFixture) {
	Describe("conditions", func() {
		It("reports a missing PlanModeConfig and holds an entry until it exists", func() {
			fx.ns = newNamespace(false)
			startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			a := newSession(fx.ns, "nocfg", T, nil, fx.be().agentStore)
			Eventually(func(g Gomega) {
				as := a.get()
				g.Expect(readyReason(as)).To(Equal("False/" + agentsv1alpha1.ReasonConfigMissing))
				g.Expect(as.Status.PlanMode.Pending).To(BeTrue())
			}, timeout, interval).Should(Succeed())
			Expect(a.planModes()).To(BeEmpty())
			createConfig(fx.ns, agentsv1alpha1.DefaultPlanModeConfigName)
			as := a.awaitStatus(true, false)
			Expect(readyReason(as)).To(Equal("True/InSync"))
			Expect(as.Status.PlanMode.Config).NotTo(BeNil())
			Expect(as.Status.PlanMode.Config.Name).To(Equal("default"))
			Expect(as.Status.PlanMode.Config.SectionSHA256).To(HaveLen(16))
			Expect(as.Status.PlanMode.Config.SectionSHA256).To(Equal(agentsv1alpha1.SectionDigest(testSection)))
			Expect(readyMessage(as)).To(BeEmpty(), "Ready=True InSync says nothing status.planMode.active does not")
		})

		It("names a failure that does not stall a session out of plan mode in Ready=True's message", func() {
			fx.ns = newNamespace(false)
			startManager(fx.ns, fx.be().mgrStore, managerOptions{})
			a := newSession(fx.ns, "offnocfg", nil, nil, fx.be().agentStore)
			Eventually(func(g Gomega) {
				as := a.get()
				g.Expect(readyReason(as)).To(Equal("True/InSync"))
				g.Expect(readyMessage(as)).To(ContainSubstring(`PlanModeConfig "default" not found`))
			}, timeout, interval).Should(Succeed())
		})
	})
}
