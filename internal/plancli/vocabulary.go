package plancli

import (
	"strconv"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// One vocabulary for a session's plan state, defined here once: kubectl plan list prints the
// columns of kubectl get agentsessions (the printer columns of api/v1alpha1), with the same
// headers and the same values, because both read the same fields; kubectl plan status uses
// the same names, with on and off beside true and false in its sentences; docs/kubectl-plan.md
// lists them. A column shows the API field's value, as kubectl does: true or false, a review
// phase, and an empty cell for a field that is unset (none, in a sentence).
//
//	PLAN-MODE  status.planMode.active          plan mode committed in the session log: true (on), false (off)
//	PENDING    status.planMode.pendingActive   the plan mode waiting for the agent's next step boundary
//	SELECTED   spec.planMode.active            the user's selection; empty: the session follows its log
//	REVIEW     status.review.phase             Pending (awaiting a decision), Approved, KeepPlanning, Dismissed, Expired, Rejected
//	READY      the Ready condition's status
const (
	ColumnPlanMode = "PLAN-MODE"
	ColumnPending  = "PENDING"
	ColumnSelected = "SELECTED"
	ColumnReview   = "REVIEW"
	ColumnReady    = "READY"
)

// noValue is what kubectl get prints for a custom column whose field is unset: nothing.
const noValue = ""

// noneWord is an unset field in a sentence.
const noneWord = "none"

// SessionRow is one session in the vocabulary: a row of kubectl plan list, and an item of its
// -o json|yaml.
type SessionRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// PlanMode is status.planMode.active.
	PlanMode bool `json:"planMode"`
	// Pending is status.planMode.pendingActive; nil when nothing waits.
	Pending *bool `json:"pending"`
	// Selected is spec.planMode.active; nil when there is no selection.
	Selected *bool `json:"selected"`
	// Review is status.review.phase; empty before the first review.
	Review v1alpha1.ReviewPhase `json:"review,omitempty"`
	// Ready is the Ready condition's status; empty before the manager reported.
	Ready   string    `json:"ready,omitempty"`
	Created time.Time `json:"created"`
}

func rowOf(as *v1alpha1.AgentSession) SessionRow {
	r := SessionRow{Namespace: as.Namespace, Name: as.Name, PlanMode: as.Status.PlanMode.Active,
		Pending: as.Status.PlanMode.PendingActive, Selected: as.Spec.PlanMode.Active, Created: as.CreationTimestamp.UTC()}
	if rs := as.Status.Review; rs != nil {
		r.Review = rs.Phase
	}
	if c := apimeta.FindStatusCondition(as.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		r.Ready = string(c.Status)
	}
	return r
}

// cells are the row's values as the columns print them.
func (r SessionRow) cells() (planMode, pending, selected, review, ready string) {
	return strconv.FormatBool(r.PlanMode), optionalBool(r.Pending), optionalBool(r.Selected), orNone(string(r.Review)), orNone(r.Ready)
}

func optionalBool(b *bool) string {
	if b == nil {
		return noValue
	}
	return strconv.FormatBool(*b)
}

func orNone(s string) string {
	if s == "" {
		return noValue
	}
	return s
}

// inWords is a plan-mode value in a sentence: "true (on)".
func inWords(b bool) string {
	if b {
		return "true (on)"
	}
	return "false (off)"
}
