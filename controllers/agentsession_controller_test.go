package controllers

import (
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
)

// The reconciler's specs run once per session-log backend, each group from the test file of
// the phase it is about.
var _ = Describe("AgentSession reconciler", func() {
	for _, name := range []string{"sqlite", "postgres"} {
		Context("with the "+name+" log store", func() {
			fx := &specFixture{be: func() *backend { return backends[name] }}
			selectionSpecs(fx)
			boundarySpecs(fx)
			appendFailureSpecs(fx)
			forkSpecs(fx)
			crashSafetySpecs(fx)
			scaleSpecs(fx)
			conditionsSpecs(fx)
			heldPendingSpecs(fx)
		})
	}
})

// T and F are the selections the specs make.
var T, F = ptr.To(true), ptr.To(false)

// specFixture is what a group of the reconciler's specs shares: the backend, and the namespace
// and manager of the spec that runs.
type specFixture struct {
	be  func() *backend
	ns  string
	mgr *testManager
}

// start gives a spec its own namespace, default PlanModeConfig and manager.
func (fx *specFixture) start() {
	fx.ns = newNamespace(true)
	fx.mgr = startManager(fx.ns, fx.be().mgrStore, managerOptions{})
}

// scaleSpecs: many sessions at once.
func scaleSpecs(fx *specFixture) {
	Describe("scale", func() {
		BeforeEach(fx.start)

		It("converges 50 sessions toggled concurrently, with no duplicate plan/mode", func() {
			const n = 50
			agents := make([]*agent, n)
			for i := range agents {
				agents[i] = newSession(fx.ns, fmt.Sprintf("s%02d", i), nil, nil, fx.be().agentStore)
			}
			for _, a := range agents {
				a.awaitStatus(false, false)
			}
			// Half of them are inside a turn: their selection waits for the boundary.
			for i := 0; i < n; i += 2 {
				agents[i].startTurn(1)
			}
			before := stableWrites(&fx.mgr.statusWrites)
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
				a.awaitStatus(i%2 == 1, i%2 == 0)
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
				a.awaitStatus(true, false)
				Expect(a.planModes()).To(HaveLen(1), a.sid)
			}
			// One write per between-turns toggle; pending + ack per in-turn toggle.
			expectWrites(&fx.mgr.statusWrites, before+n/2+n, "one write per between-turns toggle, two per in-turn toggle")
			Expect(fx.mgr.store.appends.Load()).To(BeEquivalentTo(n))
		})
	})
}
