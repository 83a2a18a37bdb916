package reliability

import (
	"fmt"
	"math"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/eventsink"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

var _ = Describe("malformed boundary reports", func() {
	It("answers each with Failed, a condition and a Warning Event, and never appends; a valid report then commits", func() {
		url, err := pg.NewDatabase(suiteCtx, "badreport")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("badreport", 1, url, nil)
		startManager(managerOpts{store: url})
		id := w.sessionID("s0")
		// The agent's side by hand: turn 1 with step 1 done, so the next boundary is (1, 2).
		evs := harness.Sequence(0, agentsdk.TurnStart(1), agentsdk.StepStart(1, 1),
			agentsdk.RequestHeader(harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "p", Model: "m"}}, harness.HeaderReasonInitial),
			agentsdk.StepEnd(1, 1))
		_, err = w.store.Append(suiteCtx, id, evs)
		Expect(err).NotTo(HaveOccurred())
		next := int64(len(evs))
		// A selection waits for the boundary.
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
			mergePatch(`{"spec":{"planMode":{"active":true}}}`))).To(Succeed())
		eventually(30*time.Second, func(g Gomega) { g.Expect(w.get("s0").Status.PlanMode.Pending).To(BeTrue()) })

		// The reports come from the session's bound agent, as the status webhook requires.
		agent, err := client.New(w.agentConfigFor("s0"), client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		report := func(turn, step, seq int64) error {
			return agent.Status().Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
				mergePatch(fmt.Sprintf(`{"status":{"agent":{"boundary":{"turn":%d,"step":%d,"seq":%d}}}}`, turn, step, seq)))
		}
		// A report the log has moved past (an older turn, a seq behind the log) is dismissed
		// (protocol v2): an agent that stopped waiting leaves one; it needs no one.
		bad := []struct {
			name            string
			turn, step, seq int64
			dismissed       bool
		}{
			{"turn going backwards", 0, 2, next, true},
			{"turn ahead of the log", 2, 1, next, false},
			{"step going backwards", 1, 1, next, false},
			{"seq behind the log", 1, 2, next - 1, true},
			{"seq ahead of the log", 1, 2, next + 5, false},
			{"huge seq", 1, 2, math.MaxInt64, false},
			{"huge step", 1, math.MaxInt64, next + 1, false},
		}
		refused := 0
		for _, b := range bad {
			if err := report(b.turn, b.step, b.seq); err != nil {
				// The API's own validation refused it: nothing reaches the manager, also fine.
				GinkgoWriter.Printf("%s: refused by the API server: %v\n", b.name, err)
				continue
			}
			refused++
			eventually(30*time.Second, func(g Gomega) {
				s := w.get("s0")
				lb := s.Status.PlanMode.LastBoundary
				g.Expect(lb).NotTo(BeNil())
				g.Expect([]int64{lb.Turn, lb.Step, lb.Seq}).To(Equal([]int64{b.turn, b.step, b.seq}), b.name)
				ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
				g.Expect(ready).NotTo(BeNil())
				if b.dismissed {
					g.Expect(lb.Result).To(Equal(v1alpha1.BoundaryDismissed), b.name)
					g.Expect(lb.Reason).To(Equal(v1alpha1.ReasonSuperseded), b.name)
					g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonSelectionPending), b.name)
				} else {
					g.Expect(lb.Result).To(Equal(v1alpha1.BoundaryFailed), b.name)
					g.Expect(lb.Message).To(ContainSubstring("status.agent.boundary"), b.name)
					g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonInvalidBoundary), b.name)
				}
				g.Expect(s.Status.PlanMode.Pending).To(BeTrue(), "%s: the selection must stay pending", b.name)
			})
			t, err := w.store.Tail(suiteCtx, id)
			Expect(err).NotTo(HaveOccurred())
			Expect(t.NextSeq).To(Equal(next), "%s: the log moved", b.name)
		}
		Expect(refused).To(BeNumerically(">=", 5), "the manager saw too few of the bad reports")
		// The manager writes Events after the status, from its own queue: they appear, they are
		// not there at once. The suite's order is random, and the sessions of the specs before
		// this one are still in the cluster: this manager reconciling them all at its start is a
		// storm, during which each Event is held for up to a minute (docs/performance.md).
		warnedAfter := time.Now()
		eventually(eventsink.DefaultHoldFor+30*time.Second, func(g Gomega) {
			var events eventsv1.EventList
			g.Expect(k8s.List(suiteCtx, &events, client.InNamespace(w.ns))).To(Succeed())
			warned := 0
			for _, e := range events.Items {
				if e.Type == "Warning" && e.Reason == v1alpha1.ReasonInvalidBoundary {
					warned++
				}
			}
			g.Expect(warned).To(BeNumerically(">", 0), "no Warning Event for a malformed report")
		})
		GinkgoWriter.Printf("the Warning Event was there %s after the last malformed report was answered\n", time.Since(warnedAfter).Round(time.Millisecond))

		// The valid report commits the pending selection at its seq, once.
		Expect(report(1, 2, next)).To(Succeed())
		eventually(30*time.Second, func(g Gomega) {
			lb := w.get("s0").Status.PlanMode.LastBoundary
			g.Expect(lb).NotTo(BeNil())
			g.Expect(lb.Result).To(Equal(v1alpha1.BoundaryAdmitted))
			g.Expect(lb.NextSeq).To(Equal(next + 1))
			g.Expect(lb.Active).To(BeTrue())
		})
		_, err = w.store.Append(suiteCtx, id, harness.Sequence(next+1, agentsdk.StepStart(1, 2),
			agentsdk.Notice(harness.NoticePlanOn), agentsdk.StepEnd(1, 2), agentsdk.TurnEnd(1, harness.TurnCompleted)))
		Expect(err).NotTo(HaveOccurred())
		w.steps.Add(2) // the two steps written by hand above
		w.settle(time.Minute)
		w.report("malformed boundary reports", refused, 0, "each answered Failed with a condition and a Warning Event; no append; the valid report then committed once")
	})
})
