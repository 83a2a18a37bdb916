package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of the review record (docs/review.md, "Revisions").
const (
	// MaxReviewVotes caps spec.reviewVotes and status.review.votes.
	MaxReviewVotes = 16
	// MaxReviewHistory caps status.reviewHistory: the revisions kept, oldest dropped first.
	MaxReviewHistory = 20
	// MaxPlanModeChanges caps status.planMode.changes.
	MaxPlanModeChanges = 10
	// MaxRevisionTitleBytes caps status.reviewHistory[].title.
	MaxRevisionTitleBytes = 200
)

// Actor is an authenticated identity, as the API server put it in an admission request. The
// admission webhook stamps it on every decision and selection; a client never chooses it.
type Actor struct {
	// Username as authenticated by the API server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	Username string `json:"username"`

	// UID of the identity, when the authenticator provides one.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	UID string `json:"uid,omitempty"`

	// Groups the identity belonged to at that request.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=atomic
	// +optional
	Groups []string `json:"groups,omitempty"`
}

// ReviewVoteStatus is one decision the manager read for the plan under review.
type ReviewVoteStatus struct {
	// Decision is Approve, KeepPlanning or Dismiss.
	Decision ReviewDecisionType `json:"decision"`
	// By is who decided (the webhook's stamp).
	By Actor `json:"by"`
	// At is when the webhook admitted the decision.
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// Counted says whether the decision counts under the review policy.
	Counted bool `json:"counted"`
	// Reason says why a decision does not count (the rule it breaks, and the fix).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ReviewRevision records one plan the agent posted: the numbered revisions of a session's review.
type ReviewRevision struct {
	// Revision number, from 1.
	Revision int64 `json:"revision"`
	// ReviewID the plan was posted under. A review id names one text forever.
	ReviewID string `json:"reviewID"`
	// PlanSHA256 is the hex SHA-256 of the plan text.
	PlanSHA256 string `json:"planSHA256"`
	// Title is the plan's first heading, at most 200 bytes (text the agent wrote: clients print
	// it escaped).
	// +optional
	Title string `json:"title,omitempty"`
	// PostedAt is when the manager first saw the plan (its own clock).
	PostedAt metav1.Time `json:"postedAt"`
	// Phase is how the revision ended, or Pending while it is under review. Withdrawn: the agent
	// stopped waiting before anyone decided.
	Phase ReviewPhase `json:"phase"`
	// DecidedAt is when the revision was closed.
	// +optional
	DecidedAt *metav1.Time `json:"decidedAt,omitempty"`
	// DecidedBy are the usernames whose decisions closed it (every counted approver of an
	// approval).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	DecidedBy []string `json:"decidedBy,omitempty"`
}

// PlanModeChangeCause says what caused a plan/mode event.
// +kubebuilder:validation:Enum=Selection;Approval
type PlanModeChangeCause string

const (
	// PlanModeChangeSelection is a user's selection (spec.planMode.active).
	PlanModeChangeSelection PlanModeChangeCause = "Selection"
	// PlanModeChangeApproval is an approved plan's exit.
	PlanModeChangeApproval PlanModeChangeCause = "Approval"
)

// PlanModeChange names who caused one plan/mode event the manager appended. The log's plan/mode
// data stays exactly {active}, which the harness reads; the actor is kept here.
type PlanModeChange struct {
	// Seq of the plan/mode event in the session log.
	Seq int64 `json:"seq"`
	// Active is the state the event entered.
	Active bool `json:"active"`
	// Cause is Selection or Approval.
	Cause PlanModeChangeCause `json:"cause"`
	// By is who selected (Selection), or whose approval completed the review (Approval). Unset
	// when no identity was recorded for the selection (it predates identity stamping).
	// +optional
	By *Actor `json:"by,omitempty"`
	// Revision is the approved revision (Approval).
	// +optional
	Revision int64 `json:"revision,omitempty"`
}
