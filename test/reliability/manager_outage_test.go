package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
)

// outageToggles is how many toggles the manager-outage run lasts: RELIABILITY_OUTAGE_TOGGLES,
// else 40 (make test) or 1,000 (make soak, make soak-outage).
var outageToggles = envInt("RELIABILITY_OUTAGE_TOGGLES", pick(40, 1000))

// boundaryBound is the agents' boundary wait in these runs: the SDK's default.
const boundaryBound = agentsdk.DefaultBoundaryWait

// apiRoundTrip is the allowance for the one API round trip a boundary may add to its bound
// (the report), on a machine shared with other test processes.
const apiRoundTrip = 1500 * time.Millisecond

// recordBoundary keeps the figures of protocol v2: how long each boundary took, and whether it
// went on without the manager.
func (w *workload) recordBoundary(r refagent.StepRecord) {
	for {
		cur := w.maxBoundary.Load()
		if int64(r.Latency) <= cur || w.maxBoundary.CompareAndSwap(cur, int64(r.Latency)) {
			break
		}
	}
	if r.Unanswered {
		w.unanswered.Add(1)
	}
	if r.Adopted {
		w.adopted.Add(1)
	}
}

// flushPending runs one turn on every session whose selection waits for a step boundary of a
// later turn (protocol v2: it is not committed when a turn ends), so convergence can check
// that it lands. The manager must be running; no other agent may run.
func (w *workload) flushPending(timeout time.Duration) {
	GinkgoHelper()
	script, err := refagent.ParseScript(strings.NewReader("turn flush\nstep\nend\n"))
	Expect(err).NotTo(HaveOccurred())
	for _, name := range w.names {
		var s *v1alpha1.AgentSession
		// Let the manager take on the last selections first: what waits is then known.
		eventually(timeout, func(g Gomega) {
			s = w.get(name)
			if x := s.Spec.PlanMode.Active; x != nil {
				g.Expect(s.Status.PlanMode.Selection).To(Equal(x), "%s: selection not taken on", name)
			}
		})
		if !s.Status.PlanMode.Pending {
			continue
		}
		ctx, cancel := context.WithTimeout(suiteCtx, timeout)
		c, err := agentsdk.New(ctx, agentsdk.Options{Config: w.agentConfigFor(name), Namespace: w.ns, Name: name, Store: w.store, SyncTimeout: 10 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		_, err = refagent.Run(ctx, refagent.Options{Client: c, Script: script, BoundaryTimeout: timeout})
		c.Close()
		cancel()
		Expect(err).NotTo(HaveOccurred())
	}
}

// blockedTurns counts turn/end {blocked} in every session's log.
func (w *workload) blockedTurns(g Gomega) int {
	n := 0
	for _, name := range w.names {
		evs, err := w.store.ReadFrom(suiteCtx, w.sessionID(name), 0, 0)
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range evs {
			if e.Type != harness.TypeTurnEnd {
				continue
			}
			var te harness.TurnEnd
			g.Expect(json.Unmarshal(e.Data, &te)).To(Succeed())
			if te.Reason.Kind == harness.TurnEndBlocked {
				n++
			}
		}
	}
	return n
}

// checkLogs runs the invariant checker over every session's log and the answers seen so far,
// without the final-state check (the run is still going): no plan/mode inside a step, none
// duplicated, every answer matching the log.
func (w *workload) checkLogs() []string {
	GinkgoHelper()
	var found []string
	for _, name := range w.names {
		// The answers first, then the log: an answer is published after what it says is in
		// the log, so a log read after it holds all of it (read the other way round, an
		// answer to a boundary appended meanwhile would name events the read has not seen).
		acks := w.acks.of(name)
		evs, err := w.store.ReadFrom(suiteCtx, w.sessionID(name), 0, 0)
		Expect(err).NotTo(HaveOccurred())
		for _, v := range invariant.Check(invariant.Input{Events: evs, Acks: acks}) {
			found = append(found, name+": "+v.String())
		}
	}
	return found
}

// healthy: Ready=True, or Ready=False SelectionPending with Reconciling=True while a selection
// truly waits for a boundary; never Stalled.
func healthy(g Gomega, s *v1alpha1.AgentSession) {
	g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation), "%s: generation not observed", s.Name)
	g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionStalled)).To(BeFalse(), "%s: Stalled", s.Name)
	ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil(), "%s: no Ready", s.Name)
	if ready.Status == metav1.ConditionTrue {
		return
	}
	g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSelectionPending), "%s: Ready=False %s: %s", s.Name, ready.Reason, ready.Message)
	g.Expect(s.Status.PlanMode.Pending).To(BeTrue(), "%s: SelectionPending with nothing pending", s.Name)
	g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ConditionReconciling)).To(BeTrue(), "%s: waiting but not Reconciling", s.Name)
}

// signal sends sig to the manager process (SIGSTOP freezes it as a hung or descheduled
// process is frozen: its connections stay open, it answers nothing).
func (p *managerProc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}

var _ = Describe("manager outage (protocol v2)", func() {
	It("never lets a step wait on a SIGSTOPped or SIGKILLed manager longer than the bound, blocks no turn, and loses or doubles no selection", func() {
		url, err := pg.NewDatabase(suiteCtx, "mgroutage")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("mgroutage", 4, url, nil)
		m := startManager(managerOpts{store: url})
		w.startAgents()
		eventually(time.Minute, func(g Gomega) { g.Expect(w.steps.Load()).To(BeNumerically(">", 8)) })
		// Paced so that faults land across the toggles: one fault per handful of toggles.
		w.startDriver(1, 0, 500*time.Millisecond)

		stops, kills := 0, 0
		var down time.Duration
		// The faults go on past the toggles until one caught a step at its boundary (the
		// outages are random: a few may all fall between boundaries), up to twice as many.
		exercised := func() bool { return w.unanswered.Load() > 0 || w.toggles.Load() >= int64(2*outageToggles) }
		for w.toggles.Load() < int64(outageToggles) || !exercised() {
			// The fault's timing, not a synchronisation: the manager is frozen or dead for a
			// random stretch while the agents run turns and the driver toggles.
			outage := time.Duration(300+rand.IntN(2700)) * time.Millisecond
			if rand.IntN(2) == 0 {
				m.signal(syscall.SIGSTOP)
				time.Sleep(outage)
				m.signal(syscall.SIGCONT)
				stops++
			} else {
				m.kill()
				time.Sleep(outage)
				m = startManager(managerOpts{store: url})
				kills++
			}
			down += outage
			// The invariant after every fault, before anything repairs it.
			Expect(w.checkLogs()).To(BeEmpty(), "after fault %d", stops+kills)
			Expect(time.Duration(w.maxBoundary.Load())).To(BeNumerically("<=", boundaryBound+apiRoundTrip), "a step waited on the manager")
			Expect(w.failedProposals.Load()).To(BeZero(), "a step proposal failed after fault %d: %v", stops+kills, w.lastProposalErr.Load())
			time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond) // the manager runs a while
		}
		w.stopDriver()
		Expect(w.blockedTurns(Default)).To(BeZero(), "a turn ended blocked")

		// After the outage: every session healthy within one resync of the running manager
		// (its start lists and reconciles every session once).
		recovered := time.Now()
		eventually(30*time.Second, func(g Gomega) {
			for _, name := range w.names {
				healthy(g, w.get(name))
			}
		})
		recovery := time.Since(recovered)
		settle := w.settle(2 * time.Minute)
		w.report("manager SIGSTOP/SIGKILL across in-turn toggles (protocol v2)", stops+kills, recovery,
			fmt.Sprintf("%d toggles, %d SIGSTOPs, %d SIGKILLs, manager down %.1fs in all; longest boundary %s (bound %s); "+
				"%d steps went on unanswered, %d took the manager's late plan/mode; healthy %.1fs after the last fault; converged %.1fs after stopping the agents",
				w.toggles.Load(), stops, kills, down.Seconds(), time.Duration(w.maxBoundary.Load()).Round(time.Millisecond), boundaryBound,
				w.unanswered.Load(), w.adopted.Load(), recovery.Seconds(), settle.Seconds()))
		Expect(w.unanswered.Load()).To(BeNumerically(">", 0), "no step ever went on without the manager: the faults exercised nothing")
	})
})
