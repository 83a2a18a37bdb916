package controllers

import (
	"context"
	"testing"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// A decision applies only to the plan text it was taken on, and a plan naming a turn the
// session's log has not reached is not opened for review.
func TestReviewBoundToPlanAndSession(t *testing.T) {
	e := newFzEnv(t)
	store := e.store
	const read, swapped = "# The plan read\n- step 1", "# SWAPPED plan\n- rm -rf"
	inTurn := []byte{5, 0, 2} // plan mode on, a turn with an open step

	for _, tc := range []struct {
		name        string
		posted      string // status.agent.review.plan now
		opened      string // the plan the review was opened with ("" : opened now)
		digest      string // spec.review.planSHA256
		turnOffset  int64  // added to the log's turn in the posted review
		wantPhase   agentsv1alpha1.ReviewPhase
		wantRefusal bool
	}{
		{name: "the digest of the plan read approves", posted: read, digest: planmode.PlanSHA256(read), wantPhase: agentsv1alpha1.ReviewApproved},
		{name: "no digest: bound to the review id only", posted: read, wantPhase: agentsv1alpha1.ReviewApproved},
		{name: "a digest of another text is refused", posted: swapped, digest: planmode.PlanSHA256(read), wantPhase: agentsv1alpha1.ReviewPending, wantRefusal: true},
		{name: "a plan swapped under its review id is refused", posted: swapped, opened: read, wantPhase: agentsv1alpha1.ReviewPending, wantRefusal: true},
		{name: "a plan swapped under its review id, with the new digest, is refused", posted: swapped, opened: read,
			digest: planmode.PlanSHA256(swapped), wantPhase: agentsv1alpha1.ReviewPending, wantRefusal: true},
		{name: "a plan naming a turn the log has not reached is rejected", posted: read, turnOffset: 3, wantPhase: agentsv1alpha1.ReviewRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, before := e.fzSeed(t, inTurn, "fz")
			tail, _ := store.Tail(context.Background(), s.Spec.SessionID)
			f := false
			s.Generation, s.Status.ObservedGeneration = 2, 1
			s.Spec.PlanMode.Active = &f
			s.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: agentsv1alpha1.ReviewApprove, PlanSHA256: tc.digest}
			s.Status.Agent = &agentsv1alpha1.AgentReport{Review: &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: tc.posted, Turn: tail.Turn + tc.turnOffset}}
			if tc.opened != "" {
				s.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: agentsv1alpha1.ReviewPending, PlanSHA256: planmode.PlanSHA256(tc.opened)}
			}
			out, err := e.r.compute(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			e.fzAfter(t, s, before, out)
			rs, pm := out.status.Review, out.status.PlanMode
			if rs == nil || rs.Phase != tc.wantPhase {
				t.Fatalf("review %+v, want phase %s", rs, tc.wantPhase)
			}
			approved := pm.PendingSource == agentsv1alpha1.PendingSourceExit
			if approved != (tc.wantPhase == agentsv1alpha1.ReviewApproved) {
				t.Fatalf("silent exit recorded: %v, want it only for an approval (%+v)", approved, pm)
			}
			if tc.wantPhase == agentsv1alpha1.ReviewPending && rs.PlanSHA256 == planmode.PlanSHA256(tc.posted) && tc.opened != "" {
				t.Fatalf("the review's recorded digest moved to the swapped plan: %s", rs.PlanSHA256)
			}
			if tc.wantPhase == agentsv1alpha1.ReviewApproved && rs.PlanSHA256 != planmode.PlanSHA256(read) {
				t.Fatalf("status.review.planSHA256 = %q, want the digest of the plan approved", rs.PlanSHA256)
			}
			refused := false
			for _, ev := range out.events {
				refused = refused || ev.reason == EventReasonReviewDecisionRefused
			}
			if refused != tc.wantRefusal {
				t.Fatalf("ReviewDecisionRefused Event: %v, want %v (%+v)", refused, tc.wantRefusal, out.events)
			}
		})
	}
}
