package reliability

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
)

// crashPoints are faultinject's named points (controllers/faultinject), plus "random": a
// SIGKILL from outside at a random moment.
var crashPoints = []string{"after-tail", "after-append", "before-status", "after-status", "random"}

var _ = Describe("crash injection", func() {
	It("kills the manager (SIGKILL) at named points and random moments while agents run and a driver toggles; nothing is lost or doubled", func() {
		url, err := pg.NewDatabase(suiteCtx, "crash")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("crash", 4, url, nil)
		w.startAgents()
		w.startDriver(1, 0, 150*time.Millisecond)

		hit := map[string]int{}
		missed := map[string]int{}
		var lost []string
		// After every kill, before the next manager starts (and re-asserts what it can).
		checkLost := func(i int, pt string) {
			for _, l := range w.lostSelections() {
				lost = append(lost, fmt.Sprintf("after kill %d (%s): %s", i+1, pt, l))
			}
		}
		var downtime time.Duration
		for i := 0; i < sizes.crashes; i++ {
			pt := crashPoints[i%len(crashPoints)]
			if pt == "random" {
				m := startManager(managerOpts{store: url})
				// The fault's timing, not a synchronisation: anywhere in start-up or work.
				time.Sleep(time.Duration(200+rand.IntN(1800)) * time.Millisecond)
				m.kill()
				hit[pt]++
				checkLost(i, pt)
				continue
			}
			m := startManager(managerOpts{store: url, crashPoint: pt, crashSkip: rand.IntN(3)})
			select {
			case <-m.done:
			case <-time.After(15 * time.Second):
				m.kill() // the point was not reached in time: still a kill -9, counted apart
			}
			if m.crashedAtPoint() {
				hit[pt]++
			} else {
				missed[pt]++
			}
			checkLost(i, pt)
			downtime += time.Since(m.started)
		}
		Expect(lost).To(BeEmpty(), "selections lost at manager kills")
		GinkgoWriter.Printf("crashes at points: %v, not reached (killed instead): %v\n", hit, missed)
		for _, pt := range crashPoints[:4] {
			if sizes.crashes >= len(crashPoints)*2 {
				Expect(hit[pt]).To(BeNumerically(">", 0), "crash point %s was never reached: the hook is not wired", pt)
			}
		}
		startManager(managerOpts{store: url})
		recovery := w.settle(2 * time.Minute)
		w.report("crash: SIGKILL at named points + random", sizes.crashes, recovery,
			fmt.Sprintf("kills by point %v; points not reached in 15s (killed anyway) %v; lost selections checked after each kill, before the next manager started: 0",
				orderedCounts(hit), orderedCounts(missed)))
	})

	It("holds with two managers reconciling the same sessions at once, no leader election (both believe they lead)", func() {
		url, err := pg.NewDatabase(suiteCtx, "splitbrain")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("splitbrain", 3, url, nil)
		startManager(managerOpts{store: url})
		startManager(managerOpts{store: url})
		w.startAgents()
		w.startDriver(2, 0, 100*time.Millisecond)
		eventually(time.Minute, func(g Gomega) { g.Expect(w.steps.Load()).To(BeNumerically(">", 60)) })
		recovery := w.settle(time.Minute)
		// Compare-and-swap keeps the log's shape even so: no gap, no duplicate, no plan/mode
		// inside a step or two at one boundary. What rests on one manager's memory does not
		// hold: a manager whose cache lags the other's can commit a selection the user has
		// since replaced, or answer a boundary the other appended at without the notice the
		// other owes there (or with one it no longer owes), or publish an answer the other's
		// append made stale. Outside the supported configuration (leader election),
		// documented in docs/reliability.md and counted in the row, not hidden.
		w.reportAllowing("split brain: two managers, no leader election", 1, recovery,
			"unsupported configuration; compare-and-swap on the next seq is the only guard",
			invariant.NotCommitted, invariant.NoticeMissing, invariant.NoticeNotOwed, invariant.AckNotInLog)
	})
})

var _ = Describe("conflicts", func() {
	It("survives 10 concurrent patchers toggling the same sessions: final committed = final selection, no duplicates", func() {
		url, err := pg.NewDatabase(suiteCtx, "conflicts")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("conflicts", 3, url, nil)
		startManager(managerOpts{store: url})
		w.startAgents()
		w.startDriver(10, sizes.toggles, 100*time.Millisecond)
		w.waitDriver()
		Expect(w.toggles.Load()).To(Equal(int64(10 * sizes.toggles)))
		recovery := w.settle(time.Minute)
		w.report("conflicts: 10 patchers on 3 sessions", 10*sizes.toggles, recovery, "runs = accepted patches")
	})
})

var _ = Describe("PostgreSQL outage", func() {
	It("keeps selections pending with a condition saying why, fails proposals cleanly, and lands every selection once afterwards", func() {
		url, err := pg.NewDatabase(suiteCtx, "pgoutage")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("pgoutage", 3, url, nil)
		w.driverSkip = map[string]bool{"s0": true} // s0's selection is this spec's own
		startManager(managerOpts{store: url})
		w.startAgents()
		w.startDriver(1, 0, 150*time.Millisecond)
		eventually(time.Minute, func(g Gomega) {
			g.Expect(w.steps.Load()).To(BeNumerically(">", 20))
			g.Expect(w.toggles.Load()).To(BeNumerically(">", 15))
			g.Expect(w.planModes(g)).To(BeNumerically(">=", 2))
		})

		Expect(pg.Stop(30 * time.Second)).To(Succeed())
		down := time.Now()
		restartsBefore := w.agentRestarts.Load()
		// A selection made during the outage: the manager cannot read the log, so it says why.
		x := !w.get("s0").Status.PlanMode.Active
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
			mergePatch(fmt.Sprintf(`{"spec":{"planMode":{"active":%t}}}`, x)))).To(Succeed())
		eventually(time.Duration(sizes.outage)*time.Second+10*time.Second, func(g Gomega) {
			s := w.get("s0")
			ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonLogStoreError))
			g.Expect(s.Status.PlanMode.Active).NotTo(Equal(x), "committed during an outage?")
		})
		// The agents' proposals and appends fail: each run ends and is restarted.
		eventually(time.Duration(sizes.outage)*time.Second+10*time.Second, func(g Gomega) {
			g.Expect(w.agentRestarts.Load()).To(BeNumerically(">", restartsBefore))
		})
		if rest := time.Duration(sizes.outage)*time.Second - time.Since(down); rest > 0 {
			time.Sleep(rest) // the outage lasts its full length
		}
		w.stopDriver()
		Expect(pg.Start(suiteCtx)).To(Succeed())
		up := time.Now()
		outage := up.Sub(down)
		// Every selection, including the one made during the outage, lands once the store is back.
		eventually(2*time.Minute, func(g Gomega) {
			s := w.get("s0")
			g.Expect(s.Status.PlanMode.Selection).To(Equal(&x))
			g.Expect(s.Status.PlanMode.Active).To(Equal(x))
		})
		recovery := time.Since(up)
		settle := w.settle(2 * time.Minute)
		w.report("PostgreSQL stopped mid-workload", 1, recovery,
			fmt.Sprintf("outage %.1fs; s0's selection made during the outage committed %.1fs after the restart; all sessions converged %.1fs after stopping the agents",
				outage.Seconds(), recovery.Seconds(), settle.Seconds()))
	})
})

var _ = Describe("API server unreachable", func() {
	It("keeps agents stepping while the manager and agents cannot reach the API server, and lands the selections made meanwhile", func() {
		url, err := pg.NewDatabase(suiteCtx, "apioutage")
		Expect(err).NotTo(HaveOccurred())
		px := startProxy(strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), "/"))
		via := rest.CopyConfig(agentCfg)
		via.Host = "https://" + px.addr()
		// The manager and the agents reach the API server only through the proxy; the user
		// (the driver) still reaches it, so selections keep arriving while they cannot see them.
		w := newWorkload("apioutage", 3, url, via)
		w.driverSkip = map[string]bool{"s0": true} // s0's selection is this spec's own
		startManager(managerOpts{store: url, kubeconfig: kubeconfigVia(px.addr())})
		w.startAgents()
		w.startDriver(1, 0, 150*time.Millisecond)
		eventually(time.Minute, func(g Gomega) { g.Expect(w.steps.Load()).To(BeNumerically(">", 20)) })

		px.cut()
		down := time.Now()
		steps, toggles := w.steps.Load(), w.toggles.Load()
		// A selection made during the cut: the manager cannot see it, so nothing takes it on.
		before := w.get("s0").Status.PlanMode
		x := !before.Active
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
			mergePatch(fmt.Sprintf(`{"spec":{"planMode":{"active":%t}}}`, x)))).To(Succeed())
		Consistently(suiteCtx, func(g Gomega) {
			pm := w.get("s0").Status.PlanMode
			g.Expect(pm.Selection).To(Equal(before.Selection), "the manager took on a selection during the cut")
			g.Expect(pm.Active).To(Equal(before.Active))
		}).WithTimeout(time.Duration(sizes.outage) * time.Second / 2).WithPolling(200 * time.Millisecond).Should(Succeed())
		// Steps with nothing pending (as far as the agent knows) need no API call at all.
		eventually(time.Duration(sizes.outage)*time.Second+10*time.Second, func(g Gomega) {
			g.Expect(w.steps.Load()).To(BeNumerically(">", steps+10), "agents stopped stepping without the API server")
			g.Expect(w.toggles.Load()).To(BeNumerically(">", toggles), "no selection made during the cut")
		})
		if rest := time.Duration(sizes.outage)*time.Second - time.Since(down); rest > 0 {
			time.Sleep(rest) // the outage lasts its full length
		}
		px.restore()
		up := time.Now()
		// The manager catches up: every selection, including those made during the cut, lands.
		w.stopDriver()
		eventually(2*time.Minute, func(g Gomega) {
			g.Expect(w.get("s0").Status.PlanMode.Selection).To(Equal(&x))
			for _, name := range w.names {
				s := w.get(name)
				if x := s.Spec.PlanMode.Active; x != nil {
					g.Expect(s.Status.PlanMode.Selection).To(Equal(x), "%s: selection not taken on", name)
				}
			}
		})
		recovery := time.Since(up)
		settle := w.settle(2 * time.Minute)
		w.report("API server unreachable for manager and agents (TCP proxy cut)", 1, recovery,
			fmt.Sprintf("cut %.1fs; agents kept stepping on the no-API fast path; every selection taken on %.1fs after the cut healed; converged %.1fs after stopping the agents",
				up.Sub(down).Seconds(), recovery.Seconds(), settle.Seconds()))
	})
})

var _ = Describe("leader failover", func() {
	It("hands over to the standby within the lease time when the leader is killed mid-workload, with no duplicate append", func() {
		url, err := pg.NewDatabase(suiteCtx, "failover")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("failover", 3, url, nil)
		lease := "planmode-" + w.ns
		ms := []*managerProc{
			startManager(managerOpts{store: url, leaderElect: true, leaseID: lease}),
			startManager(managerOpts{store: url, leaderElect: true, leaseID: lease}),
		}
		w.startAgents()
		w.startDriver(1, 0, 150*time.Millisecond)
		kills := pick(1, 5)
		var worst time.Duration
		var takeovers []string
		for k := 0; k < kills; k++ {
			var leader *managerProc
			eventually(time.Minute, func(g Gomega) {
				leader = nil
				for _, m := range ms {
					if !m.exited() && m.leads() {
						leader = m
					}
				}
				g.Expect(leader).NotTo(BeNil(), "no leader")
			})
			// Mid-workload: this leader has committed selections.
			commits := 0
			eventually(time.Minute, func(g Gomega) {
				commits = w.planModes(g)
				g.Expect(commits).To(BeNumerically(">=", 2*(k+1)))
			})
			leader.kill()
			killed := time.Now()
			var next *managerProc
			eventually(time.Minute, func(g Gomega) {
				next = nil
				for _, m := range ms {
					if !m.exited() && m.leads() {
						next = m
					}
				}
				g.Expect(next).NotTo(BeNil(), "no manager took over")
			})
			took := time.Since(killed)
			takeovers = append(takeovers, fmt.Sprintf("%.1fs", took.Seconds()))
			eventually(time.Minute, func(g Gomega) {
				g.Expect(w.planModes(g)).To(BeNumerically(">", commits), "the new leader commits nothing")
			})
			if took > worst {
				worst = took
			}
			// controller-runtime's defaults: lease 15s, retry period 2s (jittered by up to 1.2x);
			// the lease may have been renewed just before the kill. Plus slack for a loaded
			// machine: soak runs share the cores with fuzzers.
			Expect(took).To(BeNumerically("<", 15*time.Second+2400*time.Millisecond+8*time.Second), "takeover after %s", took)
			ms = append(ms, startManager(managerOpts{store: url, leaderElect: true, leaseID: lease})) // a new standby
		}
		recovery := w.settle(time.Minute)
		w.report("leader killed (two managers, leader election)", kills, worst,
			fmt.Sprintf("time to recover = slowest takeover after SIGKILL of the leader (lease 15s, retry 2s); takeovers %s; converged %.1fs after stopping the agents",
				strings.Join(takeovers, ", "), recovery.Seconds()))
	})
})

func orderedCounts(m map[string]int) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
