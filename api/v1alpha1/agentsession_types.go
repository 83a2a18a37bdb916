package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentSessionSpec is what users and reviewers ask of one agent session.
// +kubebuilder:validation:XValidation:rule="has(oldSelf.fork) == has(self.fork)",message="spec.fork is immutable: it can only be set when the AgentSession is created"
type AgentSessionSpec struct {
	// SessionID is the session's key in the log store. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.sessionID is immutable: create a new AgentSession for another session"
	// +required
	SessionID string `json:"sessionID"`

	// PlanMode is the user's plan-mode selection and the guidance it uses.
	// +optional
	PlanMode PlanModeSpec `json:"planMode,omitempty"`

	// Fork, when set at creation, seeds an empty session log with the completed-turn prefix of
	// another session's log, so the new session inherits that prefix's logged plan state (a
	// spawned session, with no fork, starts inactive). Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.fork is immutable: it can only be set when the AgentSession is created"
	// +optional
	Fork *ForkSource `json:"fork,omitempty"`

	// Review is one reviewer's decision on the plan the agent posted in status.agent.review, the
	// single-decision form older clients write; a later write replaces it. It counts as that
	// reviewer's vote alongside spec.reviewVotes. Setting it needs the "approve" permission on
	// agentsessions/review, separate from the permission to toggle plan mode.
	// +optional
	Review *ReviewDecision `json:"review,omitempty"`

	// ReviewVotes are the reviewers' decisions on the plan under review, one per reviewer, in the
	// order they arrived. `kubectl plan approve|revise|dismiss` append theirs with a JSON patch, so
	// reviewers deciding at the same moment all count. Votes for the plan under review cannot be
	// changed or removed while it is open; votes naming another review are dropped by the webhook
	// with the next vote. Each needs the "approve" permission on agentsessions/review.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ReviewVotes []ReviewDecision `json:"reviewVotes,omitempty"`

	// ReviewTimeout expires a plan review that nobody answers; the exit tool call then fails
	// and the session stays in plan mode. A positive duration in Go syntax (30m, 1h30m). Unset:
	// reviews wait until answered.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|ms|s|m|h)(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|ms|s|m|h))*$') && duration(self) > duration('0s')",message="spec.reviewTimeout must be a positive duration such as 30m or 1h30m (units h, m, s, ms, us, ns); remove it to let reviews wait until answered"
	// +optional
	ReviewTimeout *metav1.Duration `json:"reviewTimeout,omitempty"`

	// Agent binds the session to the one agent identity that may write its status.agent: only
	// that ServiceAccount (in this namespace) and the manager can report boundaries, post plans
	// or record message ids for this session. Required, and unique per namespace, unless the
	// manager runs with --webhook-require-agent-binding=false; then an unbound session takes
	// status.agent from any agent identity of its namespace (the webhook warns). See
	// docs/admission.md.
	// +optional
	Agent *AgentBinding `json:"agent,omitempty"`

	// SteerQueue holds user messages for the agent, oldest first (`kubectl plan message`). The
	// agent delivers every message once, in order: those after the one named by
	// status.agent.steerID go into its next step, after that step's other input; an idle
	// agent starts a turn with them. Writers append, and drop the messages up to and including
	// status.agent.steerID (delivered). An id is used once for the session's life: each new
	// message's id must sort after every id the session has used (numbers in ids compare by
	// value, so m9 < m10; kubectl plan message chooses one).
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	SteerQueue []SteerMessage `json:"steerQueue,omitempty"`
}

// PlanModeSpec is the desired plan-mode selection.
type PlanModeSpec struct {
	// Active is the user's desired selection: true enters plan mode, false leaves it. Unset
	// means no selection: the session follows its log. Between turns a changed selection is
	// appended to the log at once; during a turn it stays pending until the agent's next step
	// boundary.
	// +optional
	Active *bool `json:"active,omitempty"`

	// ConfigRef names the PlanModeConfig in this namespace whose section is the plan guidance.
	// Defaults to the config named "default".
	// +optional
	ConfigRef *ConfigReference `json:"configRef,omitempty"`

	// SelectedBy is who last changed Active, stamped by the admission webhook from the
	// authenticated request (a value naming anyone else is refused).
	// +optional
	SelectedBy *Actor `json:"selectedBy,omitempty"`

	// SelectedAt is when the webhook admitted that change.
	// +optional
	SelectedAt *metav1.Time `json:"selectedAt,omitempty"`
}

// ConfigReference names a PlanModeConfig in the same namespace.
type ConfigReference struct {
	// Name of the PlanModeConfig.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// ForkSource names the session whose log prefix seeds this one.
type ForkSource struct {
	// SessionID of the parent session in the same log store.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	SessionID string `json:"sessionID"`

	// ThroughSeq copies events up to and including this seq; it must not end inside an open
	// turn. Unset: through the parent's last turn/end (the balanced completed-turn prefix).
	// +kubebuilder:validation:Minimum=0
	// +optional
	ThroughSeq *int64 `json:"throughSeq,omitempty"`
}

// AgentBinding names the agent identity of one session.
type AgentBinding struct {
	// ServiceAccountName is the ServiceAccount in the session's namespace the agent pod runs
	// as (the pod's spec.serviceAccountName).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	ServiceAccountName string `json:"serviceAccountName"`
}

// ReviewDecisionType is a reviewer's answer to a plan review.
// +kubebuilder:validation:Enum=Approve;KeepPlanning;Dismiss
type ReviewDecisionType string

const (
	// ReviewApprove leaves plan mode silently at the next step boundary; the tool returns
	// {approved: true}. The approving write must also set spec.planMode.active to false (or
	// leave it unset), so the user's next selection of plan mode is a change the manager sees.
	ReviewApprove ReviewDecisionType = "Approve"
	// ReviewKeepPlanning fails the tool call with the reviewer's feedback; plan mode stays on.
	ReviewKeepPlanning ReviewDecisionType = "KeepPlanning"
	// ReviewDismiss returns {approved: false} and concludes the agent's turn; plan mode stays on.
	ReviewDismiss ReviewDecisionType = "Dismiss"
)

// ReviewDecision answers one posted plan, named by its review ID, so a decision for an older
// plan never applies to a newer one.
type ReviewDecision struct {
	// ReviewID is the id of the plan under review (status.agent.review.id).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	ReviewID string `json:"reviewID"`

	// Decision is Approve, KeepPlanning or Dismiss.
	// +required
	Decision ReviewDecisionType `json:"decision"`

	// Feedback goes back to the model with KeepPlanning.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Feedback string `json:"feedback,omitempty"`

	// PlanSHA256 is the hex SHA-256 of the plan text the reviewer read
	// (status.agent.review.plan), which `kubectl plan approve` sets. The webhook and the
	// manager refuse a decision whose digest is not the plan's under review, so a decision
	// never applies to a text the reviewer did not see. An Approve without it is refused unless
	// the namespace's ReviewPolicy sets allowApprovalWithoutDigest.
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
	// +optional
	PlanSHA256 string `json:"planSHA256,omitempty"`

	// DecidedBy is who took the decision, stamped by the admission webhook from the
	// authenticated request (a value naming anyone else is refused).
	// +optional
	DecidedBy *Actor `json:"decidedBy,omitempty"`

	// DecidedAt is when the webhook admitted the decision.
	// +optional
	DecidedAt *metav1.Time `json:"decidedAt,omitempty"`
}

// SteerMessage is one user message for the agent's next step (an entry of spec.steerQueue).
// +kubebuilder:validation:XValidation:rule="has(self.text) || has(self.images)",message="a message needs text or at least one image: set text, images, or both"
type SteerMessage struct {
	// ID makes delivery idempotent: the agent records each ID once.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +required
	ID string `json:"id"`

	// Text of the message, recorded as the step's user message. Optional when Images is set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Text string `json:"text,omitempty"`

	// Images attached to the message (`kubectl plan message --image`), recorded before the
	// text as the harness records /plan's image attachments. Each image's bytes are in the
	// ConfigMap plan-image-<sha256 hex> of the session's namespace, key "image".
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Images []ImageAttachment `json:"images,omitempty"`
}

// ImageAttachment describes one image of a user message as the harness's attachment reference
// does: a content address and the image's intrinsic metadata.
type ImageAttachment struct {
	// AttachmentID is the image's content address, "sha256:" and the hex SHA-256 of its bytes.
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	// +required
	AttachmentID string `json:"attachmentId"`

	// MediaType is the format read from the bytes.
	// +kubebuilder:validation:Enum=image/png;image/jpeg;image/webp;image/gif
	// +required
	MediaType string `json:"mediaType"`

	// Width in pixels.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2000
	// +required
	Width int32 `json:"width"`

	// Height in pixels.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2000
	// +required
	Height int32 `json:"height"`

	// Bytes is the encoded size.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024000
	// +required
	Bytes int64 `json:"bytes"`

	// Name is the file's base name, for display.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	Name string `json:"name,omitempty"`
}

// AgentSessionStatus is the observed state. status.planMode and the conditions are written
// only by the manager; status.agent only by the agent pod.
type AgentSessionStatus struct {
	// ObservedGeneration is the spec generation the manager last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// planMode, review and conditions are atomic: only the manager writes them (the status
	// webhook keeps agents to status.agent), always as whole values, so the API server need not
	// track their ownership field by field. That keeps managedFields short and costs it less
	// CPU on every status write (docs/performance.md). status.agent stays granular: the
	// protocol lets an agent server-side apply status.agent.boundary alone, which an atomic
	// struct would turn into replacing all of status.agent.

	// PlanMode is the manager's projection of the session log plus the pending selection.
	// +optional
	// +structType=atomic
	PlanMode PlanModeStatus `json:"planMode,omitempty"`

	// Agent is written only by the agent pod, with its own field manager.
	// +optional
	Agent *AgentReport `json:"agent,omitempty"`

	// Review is the manager's view of the plan under review.
	// +optional
	// +structType=atomic
	Review *ReviewStatus `json:"review,omitempty"`

	// ReviewHistory records every plan the agent posted, oldest first, at most the last 20: its
	// revision number, review id, digest, when it was posted and how it ended. A review id names
	// one text forever: the manager refuses a plan posted again under a recorded id with another
	// text.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	ReviewHistory []ReviewRevision `json:"reviewHistory,omitempty"`

	// Conditions, unlike the usual map keyed by type: a condition another writer added would
	// not survive the manager's next write anyway, and a map made the API server track each
	// leaf of Ready (a managedFields entry per leaf, handled on every write).

	// Conditions: Ready, plus reasons that explain a stuck selection. The manager owns the
	// whole list and replaces it on each status write.
	// +listType=atomic
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PendingSource says who asked for a pending state.
// +kubebuilder:validation:Enum=User;Exit
type PendingSource string

const (
	// PendingSourceUser is a user selection: narrated when it reaches the log.
	PendingSourceUser PendingSource = "User"
	// PendingSourceExit is an approved exit_plan_mode: never narrated.
	PendingSourceExit PendingSource = "Exit"
)

// PlanModeStatus is the committed plan state (a fold of the log) and any pending selection.
type PlanModeStatus struct {
	// Active is the committed state: the last plan/mode in the log, false when there is none.
	// +optional
	Active bool `json:"active"`

	// Pending is true while a selection that differs from the committed state awaits the
	// agent's next step boundary. A selection made during a turn is written here only when the
	// agent's report does not come within the manager's --pending-status-delay; until then
	// status.observedGeneration lags metadata.generation and the agent asks at its boundary
	// because spec.planMode.active differs from selection.
	// +optional
	Pending bool `json:"pending"`

	// PendingActive is the target of the pending selection (the harness's get().pending). It
	// can equal Active when an entry was cancelled during a turn and no boundary cleared it yet.
	// +optional
	PendingActive *bool `json:"pendingActive,omitempty"`

	// PendingSource is User for a selection and Exit for an approved exit_plan_mode.
	// +optional
	PendingSource PendingSource `json:"pendingSource,omitempty"`

	// QueuedInTurn is the turn that was open in the log when the pending selection was queued;
	// 0 when it was made between turns. A selection queued in a turn is appended at a step
	// boundary, in that turn or a later one, never between turns.
	// +optional
	QueuedInTurn int64 `json:"queuedInTurn,omitempty"`

	// Selection is the spec.planMode.active value the manager has taken on, so a repeated or
	// reverted selection is recognised (noop, cancelled) instead of appended twice.
	// +optional
	Selection *bool `json:"selection,omitempty"`

	// NextSeq is the log position this status reflects: the seq the next event will get.
	// +optional
	NextSeq int64 `json:"nextSeq,omitempty"`

	// StoreID is the identity of the session-log store NextSeq was read from (created with
	// the store's schema). A store with another identity, or a log that ends before NextSeq,
	// is not this session's log: the manager and the agent stop with LogStoreMismatch
	// instead of running on it (docs/operations.md).
	// +optional
	StoreID string `json:"storeID,omitempty"`

	// TurnOpen reports whether the log has a turn/start with no turn/end after it.
	// +optional
	TurnOpen bool `json:"turnOpen,omitempty"`

	// ToldActive is the plan state in force at the last request/header (what the model was
	// last told); unset when the log has no request/header yet.
	// +optional
	ToldActive *bool `json:"toldActive,omitempty"`

	// Config is the PlanModeConfig in force.
	// +optional
	Config *ConfigInForce `json:"config,omitempty"`

	// LastTransitionTime is when the committed state last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`

	// Notice is owed by a user selection the manager appended between turns while the model
	// had last been told the other state: the agent records it as the last message of the first
	// step admitted after Seq, with no API write of its own.
	// +optional
	Notice *OwedNotice `json:"notice,omitempty"`

	// LastBoundary is the acknowledgement of the step boundary the manager last answered.
	// +optional
	LastBoundary *BoundaryAck `json:"lastBoundary,omitempty"`

	// Changes names who caused the last plan/mode events the manager appended (newest last, at
	// most 10): the session log's plan/mode data is exactly {active}, so the actor is kept here.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Changes []PlanModeChange `json:"changes,omitempty"`
}

// OwedNotice is a plan-mode notice for the first step after a between-turns commit.
type OwedNotice struct {
	// Seq of the plan/mode event the notice narrates.
	Seq int64 `json:"seq"`
	// Text of the notice (the harness's exact wording).
	Text string `json:"text"`
}

// ConfigInForce identifies the guidance text in force.
type ConfigInForce struct {
	// Name of the PlanModeConfig.
	Name string `json:"name"`
	// Generation of the PlanModeConfig that was read.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// SectionSHA256 is the first 16 hex digits of the section text's SHA-256 (SectionDigest), so
	// a changed text shows even when a config is deleted and created again at the same
	// generation. Enough to tell texts apart, and a quarter of the bytes every status write
	// carries.
	// +optional
	SectionSHA256 string `json:"sectionSHA256,omitempty"`
}

// BoundaryResult is the outcome of a step proposal.
// +kubebuilder:validation:Enum=Admitted;Failed;Dismissed
type BoundaryResult string

const (
	// BoundaryAdmitted means the step may proceed with the committed state in the acknowledgement.
	BoundaryAdmitted BoundaryResult = "Admitted"
	// BoundaryFailed means the report could not be acted on: the log store failed (a protocol
	// v2 agent then proceeds under the committed state) or the report does not match a live
	// turn. The selection stays pending.
	BoundaryFailed BoundaryResult = "Failed"
	// BoundaryDismissed (protocol v2) answers a report the log has moved past: the agent
	// stopped waiting and its step started (or its turn ended) under the committed state. The
	// selection stays pending for a later boundary; nothing is wrong.
	BoundaryDismissed BoundaryResult = "Dismissed"
)

// BoundaryAck answers one step boundary the agent reported.
type BoundaryAck struct {
	// Turn and Step of the boundary answered.
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
	// Seq is the log position the agent reported at the boundary.
	Seq int64 `json:"seq"`
	// Result is Admitted, Failed or Dismissed.
	Result BoundaryResult `json:"result"`
	// Active is the committed plan state the step must use.
	Active bool `json:"active"`
	// NextSeq is the log position after any plan/mode the manager appended; the agent appends
	// its step/start there.
	NextSeq int64 `json:"nextSeq"`
	// Notice, when set, is the text of the plugin-sourced user/message notice the agent records
	// as the last message of the admitted step.
	// +optional
	Notice string `json:"notice,omitempty"`
	// Reason says why a result is Failed: InvalidBoundaryReport (the report does not match the
	// log; the agent must read the tail again) or LogStoreUnavailable (the manager could not
	// read or append; the selection stays pending for the next boundary); or why it is
	// Dismissed: Superseded (the log moved past the report).
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains a Failed result.
	// +optional
	Message string `json:"message,omitempty"`
	// Time the acknowledgement was written.
	Time metav1.Time `json:"time"`
}

// AgentReport is the agent pod's own part of the status.
type AgentReport struct {
	// Boundary is the step boundary the agent is waiting at. The agent writes it only when a
	// selection waits (pending, or in spec and not yet taken on by the status) or a plan/mode
	// is not yet covered by the status, and waits for status.planMode.lastBoundary to answer it.
	// +optional
	Boundary *StepBoundary `json:"boundary,omitempty"`

	// Review is the plan the agent posted for review through exit_plan_mode.
	// +optional
	Review *PlanReviewRequest `json:"review,omitempty"`

	// SteerID is the id of the last user message of spec.steerQueue the agent recorded in the
	// log.
	// +optional
	SteerID string `json:"steerID,omitempty"`
}

// StepBoundary is a proposed step the agent waits to have acknowledged.
type StepBoundary struct {
	// Turn number (continues across the session's turns).
	// +kubebuilder:validation:Minimum=1
	Turn int64 `json:"turn"`
	// Step number within the turn, from 1.
	// +kubebuilder:validation:Minimum=1
	Step int64 `json:"step"`
	// Seq is the log's next seq as the agent sees it at the boundary.
	// +kubebuilder:validation:Minimum=0
	Seq int64 `json:"seq"`
	// Time the boundary was reported.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// PlanReviewRequest is a plan the agent presents for review.
type PlanReviewRequest struct {
	// ID names this review; decisions must quote it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`
	// Plan is the complete markdown plan, starting with a `# ` heading.
	// +kubebuilder:validation:MaxLength=262144
	Plan string `json:"plan"`
	// Turn in which the exit tool was called.
	// +optional
	Turn int64 `json:"turn,omitempty"`
	// RequestedAt is when the plan was posted.
	// +optional
	RequestedAt *metav1.Time `json:"requestedAt,omitempty"`
}

// ReviewPhase is where a plan review stands.
// +kubebuilder:validation:Enum=Pending;Approved;KeepPlanning;Dismissed;Expired;Rejected;Withdrawn
type ReviewPhase string

// The phases of a plan review.
const (
	ReviewPending      ReviewPhase = "Pending"
	ReviewApproved     ReviewPhase = "Approved"
	ReviewKeptPlanning ReviewPhase = "KeepPlanning"
	ReviewDismissed    ReviewPhase = "Dismissed"
	ReviewExpired      ReviewPhase = "Expired"
	// ReviewRejected means the review could not be opened (for example plan mode is not committed).
	ReviewRejected ReviewPhase = "Rejected"
	// ReviewWithdrawn: the agent stopped waiting before anyone decided. Only in
	// status.reviewHistory; status.review is dropped instead.
	ReviewWithdrawn ReviewPhase = "Withdrawn"
)

// ReviewStatus is the manager's answer to the agent's review request.
type ReviewStatus struct {
	// ID of the review answered.
	ID string `json:"id"`
	// Phase of the review.
	Phase ReviewPhase `json:"phase"`
	// Message is the text the exit tool returns to the model for this outcome.
	// +optional
	Message string `json:"message,omitempty"`
	// DecidedAt is when the decision was taken.
	// +optional
	DecidedAt *metav1.Time `json:"decidedAt,omitempty"`
	// PlanSHA256 is the hex SHA-256 of the plan the manager opened the review with; a
	// decision must name this digest, if it names one.
	// +optional
	PlanSHA256 string `json:"planSHA256,omitempty"`
	// ExpiresAt is when a pending review expires (openedAt plus spec.reviewTimeout, by the
	// manager's clock; the agent's requestedAt plays no part); unset when reviews wait until
	// answered.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Revision is the plan's number among the plans this session posted, from 1
	// (status.reviewHistory).
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// OpenedAt is when the manager first saw the plan, by its own clock.
	// +optional
	OpenedAt *metav1.Time `json:"openedAt,omitempty"`
	// PostedBy is the agent identity that posted the plan: the service account the session is
	// bound to (spec.agent); unset for an unbound session.
	// +optional
	PostedBy string `json:"postedBy,omitempty"`
	// Requester is who selected plan mode on for the work the plan answers: the stamped
	// spec.planMode.selectedBy when spec.planMode.active was true as the review opened. Unset
	// when none is recorded. A ReviewPolicy may forbid the requester's approval.
	// +optional
	Requester *Actor `json:"requester,omitempty"`
	// Policy is the ReviewPolicy that governs the review ("default"); unset when the namespace
	// has none.
	// +optional
	Policy string `json:"policy,omitempty"`
	// ApprovalsRequired is how many distinct approvers the review needs.
	// +optional
	ApprovalsRequired int32 `json:"approvalsRequired,omitempty"`
	// SelfApproval is the policy's rule for the requester's approval: Allowed or Forbidden.
	// +optional
	SelfApproval SelfApproval `json:"selfApproval,omitempty"`
	// Approvals is how many counted approvals it has.
	// +optional
	Approvals int32 `json:"approvals,omitempty"`
	// AgentConnected says whether the agent that posted the plan still renews its liveness Lease
	// (docs/protocol.md, "Agent liveness"): false once the Lease expired or was released, so no
	// agent waits for the decision; unset when the agent keeps no Lease.
	// +optional
	AgentConnected *bool `json:"agentConnected,omitempty"`
	// AgentRenewedAt is when the agent last renewed its Lease, as the Lease says.
	// +optional
	AgentRenewedAt *metav1.Time `json:"agentRenewedAt,omitempty"`
	// Votes are the decisions read for this review, in the order they were admitted, each with
	// whether it counts.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Votes []ReviewVoteStatus `json:"votes,omitempty"`
}

// Condition types and reasons.
const (
	// ConditionReady is True when the committed state matches the selection and nothing is
	// stuck.
	ConditionReady = "Ready"

	// ConditionReconciling (kstatus) is True while a selection waits for a step boundary.
	ConditionReconciling = "Reconciling"
	// ConditionStalled (kstatus) is True while a human or the log store must act.
	ConditionStalled = "Stalled"

	ReasonInSync           = "InSync"
	ReasonSelectionPending = "SelectionPending"
	ReasonLogStoreError    = "LogStoreUnavailable"
	ReasonConfigMissing    = "ConfigMissing"
	ReasonInvalidBoundary  = "InvalidBoundaryReport"
	// ReasonLogStoreMismatch: the store is not the one the status was recorded against (another
	// identity), or its log ends before the recorded position (emptied, or restored from an
	// older backup). Nothing is appended until an operator restores the store or adopts this
	// one (AnnotationAdoptLogStore).
	ReasonLogStoreMismatch = "LogStoreMismatch"
	// ReasonAppendConflict: another writer kept winning the race for the log's next seq.
	ReasonAppendConflict = "AppendConflict"
	// ReasonSessionIDInUse: the log of spec.sessionID belongs to another AgentSession; this
	// one never reads or writes it (one log per session).
	ReasonSessionIDInUse = "SessionIDInUse"
	// ReasonSuperseded: a boundary report the log has moved past, dismissed (protocol v2).
	ReasonSuperseded = "Superseded"
	// ReasonForkRefused: spec.fork names a parent the session's log was not seeded from.
	ReasonForkRefused = "ForkRefused"

	// ConditionAwaitingReview is True while a posted plan waits for people to decide
	// (status.review.phase Pending). Health checks read it: the session is waiting for a
	// human, neither failed nor done (docs/review.md, "Health").
	ConditionAwaitingReview = "AwaitingReview"
	// ReasonReviewPending: the plan waits for a decision, or for more approvals.
	ReasonReviewPending = "ReviewPending"
)

// The admission webhook lists sessions by these fields on the API server itself, so its
// checks that need every session (one log per spec.sessionID, a fork's parent, one session per
// agent service account) answer the same whichever manager shard serves admission.
// +kubebuilder:selectablefield:JSONPath=".spec.sessionID"
// +kubebuilder:selectablefield:JSONPath=".spec.agent.serviceAccountName"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=as;asess,categories={planmode,agents}
// +kubebuilder:printcolumn:name="Session",type=string,JSONPath=`.spec.sessionID`,priority=1
// +kubebuilder:printcolumn:name="Plan-Mode",type=boolean,JSONPath=`.status.planMode.active`,description="Plan mode committed in the session log: true (on) or false (off)"
// +kubebuilder:printcolumn:name="Pending",type=boolean,JSONPath=`.status.planMode.pendingActive`,description="The plan mode waiting for the agent's next step boundary: true (entering) or false (leaving); empty when nothing waits"
// +kubebuilder:printcolumn:name="Selected",type=boolean,JSONPath=`.spec.planMode.active`,description="The user's selection (kubectl plan on or off); empty: none, the session follows its log"
// +kubebuilder:printcolumn:name="Review",type=string,JSONPath=`.status.review.phase`,description="The last plan review: Pending (awaiting kubectl plan approve, revise or dismiss), Approved, KeepPlanning, Dismissed, Expired or Rejected"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// AgentSession is one coding agent's session: the user's plan-mode selection in spec, and the
// committed state (a projection of the durable session log) and pending selection in status.
type AgentSession struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AgentSessionSpec `json:"spec"`
	// +optional
	Status AgentSessionStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// AgentSessionList contains a list of AgentSession.
type AgentSessionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentSession `json:"items"`
}

func init() {
	SchemeBuilder.Register(&AgentSession{}, &AgentSessionList{})
}
