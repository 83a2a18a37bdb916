package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultReviewPolicyName is the one ReviewPolicy a namespace has: it governs the plan reviews of
// every AgentSession in that namespace. A session cannot name another one, so the people who
// toggle plan mode cannot pick a laxer policy for their own plans.
const DefaultReviewPolicyName = "default"

// MaxPolicyApprovals caps ReviewPolicy spec.approvals (and so the approvals a review can need).
const MaxPolicyApprovals = 10

// SelfApproval says whether the requester of a plan may approve it.
// +kubebuilder:validation:Enum=Allowed;Forbidden
type SelfApproval string

const (
	// SelfApprovalAllowed counts the requester's approval like anyone's (the behaviour without a
	// policy).
	SelfApprovalAllowed SelfApproval = "Allowed"
	// SelfApprovalForbidden refuses the requester's approval: someone else must approve.
	SelfApprovalForbidden SelfApproval = "Forbidden"
)

// ReviewPolicySpec says who must approve a plan before the agent may leave plan mode.
type ReviewPolicySpec struct {
	// Approvals is how many distinct people must approve a plan (1 to 10). Default 1. A
	// decision to keep planning or to dismiss closes the review at once, whoever takes it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +kubebuilder:default=1
	// +optional
	Approvals int32 `json:"approvals,omitempty"`

	// Approvers limits who may approve, on top of the RBAC verb "approve" on agentsessions/review:
	// a user named in users, or a member of a group in groups. Unset: anyone with the verb.
	// +optional
	Approvers *Approvers `json:"approvers,omitempty"`

	// SelfApproval is Allowed (the default) or Forbidden: whether the requester may approve. The
	// requester is the person who last selected plan mode on for the session
	// (spec.planMode.selectedBy, stamped by the admission webhook) when the plan was posted; the
	// manager records it in status.review.requester.
	// +kubebuilder:default=Allowed
	// +optional
	SelfApproval SelfApproval `json:"selfApproval,omitempty"`

	// AllowApprovalWithoutDigest lets an approval that names no planSHA256 count. Off by
	// default: an approval must name the SHA-256 of the text the reviewer read, so it never
	// applies to another text.
	// +optional
	AllowApprovalWithoutDigest bool `json:"allowApprovalWithoutDigest,omitempty"`
}

// Approvers names the people who may approve.
type Approvers struct {
	// Users who may approve, by username as the API server authenticates them.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=set
	// +optional
	Users []string `json:"users,omitempty"`

	// Groups whose members may approve.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +listType=set
	// +optional
	Groups []string `json:"groups,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=rp,categories={planmode,agents}
// +kubebuilder:printcolumn:name="Approvals",type=integer,JSONPath=`.spec.approvals`,description="Distinct approvers a plan needs"
// +kubebuilder:printcolumn:name="Self-approval",type=string,JSONPath=`.spec.selfApproval`,description="Whether the requester may approve"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ReviewPolicy says who must approve the plans of the AgentSessions in its namespace: how many
// distinct approvers, which users or groups may approve, and whether the requester may. A
// namespace has at most one, named "default"; without one, one approval by anyone with the
// approve verb suffices. Meant to be kept in Git; validated at admission.
type ReviewPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec ReviewPolicySpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// ReviewPolicyList contains a list of ReviewPolicy.
type ReviewPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReviewPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ReviewPolicy{}, &ReviewPolicyList{})
}
