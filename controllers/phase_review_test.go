package controllers

import (
	"context"
	"testing"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// An approval writes spec.review Approve and spec.planMode.active=false in one generation (the
// webhook requires it). That false is the approval's exit, not a user selection: one generation
// carrying both must give the silent exit (pending {false, Exit}, no notice, no Committed
// transition before the review step), and only an exact Approve for the open review
// is read that way.
func TestApprovalDeselectsSilently(t *testing.T) {
	e := newFzEnv(t)
	store := e.store

	const (
		inTurn       = "in a turn"
		betweenTurns = "between turns"
	)
	logs := map[string][]byte{
		inTurn:       {5, 0, 2},    // plan mode on, a turn with an open step (told: plan mode)
		betweenTurns: {5, 0, 1, 4}, // plan mode on, a whole turn (told: plan mode), ended
	}
	f := false
	for _, tc := range []struct {
		name, log string
		feedback  string
		prev      agentsv1alpha1.ReviewPhase // status.review before ("" none: opened now)
		silent    bool                       // the false is the approval's exit
	}{
		{name: "approve, review opened now", log: inTurn, silent: true},
		{name: "approve, review pending", log: inTurn, prev: agentsv1alpha1.ReviewPending, silent: true},
		{name: "approve between turns", log: betweenTurns, prev: agentsv1alpha1.ReviewPending, silent: true},
		{name: "approve with feedback is not consent: an ordinary selection", log: inTurn, feedback: "rename it", prev: agentsv1alpha1.ReviewPending},
		{name: "a review already closed: an ordinary selection", log: betweenTurns, prev: agentsv1alpha1.ReviewApproved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, before := e.fzSeed(t, logs[tc.log], "fz")
			tail, _ := store.Tail(context.Background(), s.Spec.SessionID)
			s.Generation = 2
			s.Status.ObservedGeneration = 1
			s.Spec.PlanMode.Active = &f
			s.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove, Feedback: tc.feedback}
			s.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: "# Plan\n", Turn: tail.Turn}}
			if tc.prev != "" {
				s.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: tc.prev, PlanSHA256: planmode.PlanSHA256("# Plan\n")}
			}
			out, err := e.r.compute(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			after := e.fzAfter(t, s, before, out)
			st := out.status
			pm := st.PlanMode
			if pm.Selection == nil || *pm.Selection {
				t.Fatalf("selection %v, want false taken on", pm.Selection)
			}
			var reasons []string
			for _, ev := range out.events {
				reasons = append(reasons, ev.reason)
			}
			if !tc.silent {
				if pm.PendingSource == agentsv1alpha1.PendingSourceExit || (len(after) == len(before) && pm.PendingActive == nil) {
					t.Fatalf("an ordinary deselection expected (queued or committed by the user): pending %v source %q, log %d->%d, events %v",
						pm.PendingActive, pm.PendingSource, len(before), len(after), reasons)
				}
				return
			}
			if len(after) != len(before) {
				t.Fatalf("the reconcile that took the approval on appended %v; the exit waits for the review step's pending", after[len(before):])
			}
			for _, r := range reasons {
				if r == EventReasonCommitted {
					t.Fatalf("the approval's false was treated as a user selection: events %v", reasons)
				}
			}
			if st.Review == nil || st.Review.Phase != agentsv1alpha1.ReviewApproved {
				t.Fatalf("review %+v, want Approved", st.Review)
			}
			if pm.PendingActive == nil || *pm.PendingActive || pm.PendingSource != agentsv1alpha1.PendingSourceExit || pm.Notice != nil {
				t.Fatalf("want pending {false, Exit} and no notice, got pending %v source %q notice %+v", pm.PendingActive, pm.PendingSource, pm.Notice)
			}
			if tc.log != betweenTurns {
				return
			}
			// Between turns nothing waits for a boundary: the next reconcile appends the exit,
			// silently.
			s2 := s.DeepCopy()
			s2.Status = st
			out2, err := e.r.compute(context.Background(), s2)
			if err != nil {
				t.Fatal(err)
			}
			after2 := e.fzAfter(t, s2, after, out2)
			if len(after2) != len(after)+1 || harness.FoldPlanMode(after2) {
				t.Fatalf("want one plan/mode {false} appended, got %d new events", len(after2)-len(after))
			}
			if n := out2.status.PlanMode.Notice; n != nil {
				t.Fatalf("the approved exit owes a notice: %+v", n)
			}
		})
	}
}
