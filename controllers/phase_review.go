package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/reviewpolicy"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Plan review: the agent posts a plan in status.agent.review, reviewers answer with votes in
// spec.reviewVotes (or one decision in spec.review) naming its id, and the manager, the only
// writer of status.review and status.reviewHistory, numbers each posted plan as a revision,
// judges the votes under the namespace's ReviewPolicy (internal/reviewpolicy) and closes the
// review once with the text the exit tool returns. docs/review.md describes it.

// +kubebuilder:rbac:groups=agents.harness.dev,resources=reviewpolicies,verbs=get;list;watch

// ReviewExpiredText is the exit tool's error when nobody answered within spec.reviewTimeout.
// The harness has no expiry; the wording follows its dismissed-review text.
func ReviewExpiredText(timeout time.Duration) string {
	return fmt.Sprintf("The plan review expired after %s without an answer; stay in plan mode, stop here, and wait for the user's message.", timeout)
}

// policyRetry is how soon a review is looked at again when its ReviewPolicy could not be read.
const policyRetry = 5 * time.Second

// review answers the plan review in the status being computed. It runs after the plan-mode
// phases, on their result, and only when they did not fail (the committed state is then
// known): an approval records the silent exit as the pending selection (source Exit, never
// narrated), which the agent's next step boundary appends. It asks to look again when a
// pending review expires: no API event marks that moment.
func (sc *sessionScope) review(status *agentsv1alpha1.AgentSessionStatus) ctrl.Result {
	req := agentReview(sc.session)
	now := sc.r.now()
	if req == nil {
		reviewWithdrawn(status, now)
		return ctrl.Result{}
	}
	rules, ok := sc.reviewRules()
	if !ok {
		return ctrl.Result{RequeueAfter: policyRetry} // decided nothing; the Event says why
	}
	if status.Review == nil || status.Review.ID != req.ID {
		if !sc.openReview(status, req, rules, now) {
			return ctrl.Result{}
		}
	}
	if status.Review.Phase != agentsv1alpha1.ReviewPending {
		return ctrl.Result{} // closed once; a later decision never reopens it
	}
	adoptReview(status, req, rules, now)
	if sc.decideReview(status, req, rules, now) {
		return ctrl.Result{}
	}
	res := sc.expireReview(status, req, now)
	return soonest(res, sc.reviewAgentLiveness(status.Review, now)) // agent_liveness.go
}

// reviewRules are the rules of the session's namespace's ReviewPolicy, read once per reconcile
// from the cache; false when the policy could not be read (nothing is then decided: a review
// must never be judged by rules laxer than the policy's).
func (sc *sessionScope) reviewRules() (reviewpolicy.Rules, bool) {
	if sc.rules != nil {
		return *sc.rules, true
	}
	var p agentsv1alpha1.ReviewPolicy
	err := sc.r.Get(context.Background(), types.NamespacedName{Namespace: sc.session.Namespace, Name: agentsv1alpha1.DefaultReviewPolicyName}, &p)
	var rules reviewpolicy.Rules
	switch {
	case apierrors.IsNotFound(err) || isNoKindMatch(err):
		rules = reviewpolicy.RulesOf(nil)
	case err != nil:
		sc.emitSeries(corev1.EventTypeWarning, EventReasonReviewPolicyUnreadable, "Review",
			fmt.Sprintf("the ReviewPolicy %s/%s could not be read, so no review decision is applied: %v", sc.session.Namespace, agentsv1alpha1.DefaultReviewPolicyName, err))
		return reviewpolicy.Rules{}, false
	default:
		rules = reviewpolicy.RulesOf(&p)
	}
	sc.rules = &rules
	return rules, true
}

// approvalExits reports that this generation's spec carries an approval that the review will
// turn into the silent exit: votes that approve the plan under review under the policy, whose
// review is still open (or is opened now, in committed plan mode). The write that completes an
// approval sets spec.planMode.active to false (the admission webhook does); that false is the
// same exit, so it must not also become a narrated user selection (queued, or appended between
// turns with a notice).
func (sc *sessionScope) approvalExits() bool {
	req := agentReview(sc.session)
	if req == nil {
		return false
	}
	rules, ok := sc.reviewRules()
	if !ok {
		return false
	}
	digest, requester := planmode.PlanSHA256(req.Plan), reviewpolicy.Requester(sc.session)
	if rs := sc.session.Status.Review; rs != nil && rs.ID == req.ID {
		if rs.Phase != agentsv1alpha1.ReviewPending || sc.planChanged(rs.PlanSHA256, req) != nil {
			return false
		}
		if rs.PlanSHA256 != "" {
			digest = rs.PlanSHA256
		}
		if rs.OpenedAt != nil {
			requester = rs.Requester
		}
	} else if !sc.tail.Active || sc.reviewNotOfThisSession(req) != nil || sc.idReusedFor(req) != nil {
		return false // openReview admits the plan only in committed plan mode, for a turn of this log
	}
	return reviewpolicy.Judge(sc.session, req, digest, requester, rules).Approved()
}

func agentReview(s *agentsv1alpha1.AgentSession) *agentsv1alpha1.PlanReviewRequest {
	if s.Status.Agent == nil {
		return nil
	}
	return s.Status.Agent.Review
}

// reviewWithdrawn drops a pending review the agent no longer waits for (it cleared
// status.agent.review after its own timeout), recording the revision as withdrawn; a closed
// review stays as the record.
func reviewWithdrawn(status *agentsv1alpha1.AgentSessionStatus, now metav1.Time) {
	if rs := status.Review; rs != nil && rs.Phase == agentsv1alpha1.ReviewPending {
		closeRevision(status, rs, agentsv1alpha1.ReviewWithdrawn, nil, now)
		status.Review = nil
	}
}

// openReview starts answering a newly posted plan as the session's next revision.
// exit_plan_mode is admitted only while the committed state (the log's last plan/mode) is
// active, for a turn of this session's log, and under a review id that names no other text.
func (sc *sessionScope) openReview(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, rules reviewpolicy.Rules, now metav1.Time) bool {
	digest := planmode.PlanSHA256(req.Plan)
	// A plan posted over one still pending supersedes it: the agent no longer waits for it.
	reviewWithdrawn(status, now)
	if used := sc.idReusedFor(req); used != nil {
		// Visible on the session, and not a revision: the text under this id stays the one
		// recorded.
		why := fmt.Sprintf("exit_plan_mode was refused: review id %s was already used for another text (revision %d, sha256 %s); "+
			"a review id names one text forever, so a changed plan must be posted under a new id",
			req.ID, used.Revision, used.PlanSHA256)
		status.Review = &agentsv1alpha1.ReviewStatus{ID: req.ID, Phase: agentsv1alpha1.ReviewRejected, Message: why, DecidedAt: &now, PlanSHA256: digest, OpenedAt: &now}
		sc.emit(corev1.EventTypeWarning, EventReasonReviewRejected, "Review", fmt.Sprintf("plan review %s refused: %s", req.ID, why))
		return false
	}
	if reopened := reopenRevision(status, req, digest, now); reopened != nil {
		status.Review = sc.openedStatus(req, reopened.Revision, digest, rules, now)
		sc.emit(corev1.EventTypeNormal, EventReasonReviewOpened, "Review",
			fmt.Sprintf("plan %q posted again for review %s (revision %d, the same text)%s: decide with kubectl plan approve|revise|dismiss %s",
				planmode.PlanTitle(req.Plan), req.ID, reopened.Revision, postedByText(status.Review), sc.session.Name))
		return true
	}
	n := nextRevision(status)
	reject := func(why string) bool {
		status.Review = &agentsv1alpha1.ReviewStatus{ID: req.ID, Phase: agentsv1alpha1.ReviewRejected, Message: why, DecidedAt: &now,
			PlanSHA256: digest, Revision: n, OpenedAt: &now, PostedBy: sc.poster()}
		addRevision(status, req, n, digest, now)
		closeRevision(status, status.Review, agentsv1alpha1.ReviewRejected, nil, now)
		return false
	}
	if !sc.tail.Active {
		sc.emit(corev1.EventTypeWarning, EventReasonReviewRejected, "Review",
			fmt.Sprintf("plan review %s (revision %d) refused: plan mode is not committed in the session log", req.ID, n))
		return reject(harness.ExitErrNotInPlanMode)
	}
	if refusal := sc.reviewNotOfThisSession(req); refusal != nil { // review_binding.go
		sc.emit(corev1.EventTypeWarning, EventReasonReviewRejected, "Review", fmt.Sprintf("plan review %s (revision %d) refused: %s", req.ID, n, refusal))
		return reject(refusal.Error())
	}
	status.Review = sc.openedStatus(req, n, digest, rules, now)
	addRevision(status, req, n, digest, now)
	sc.emit(corev1.EventTypeNormal, EventReasonReviewOpened, "Review",
		fmt.Sprintf("plan %q posted for review %s (revision %d, turn %d)%s: %s; decide with kubectl plan approve|revise|dismiss %s",
			planmode.PlanTitle(req.Plan), req.ID, n, req.Turn, postedByText(status.Review), rulesText(rules), sc.session.Name))
	return true
}

// openedStatus is the status of a review opened now: the manager's clock starts its expiry,
// and the requester and the policy's demands are recorded for the reviewers to see.
func (sc *sessionScope) openedStatus(req *agentsv1alpha1.PlanReviewRequest, n int64, digest string, rules reviewpolicy.Rules, now metav1.Time) *agentsv1alpha1.ReviewStatus {
	rs := &agentsv1alpha1.ReviewStatus{ID: req.ID, Phase: agentsv1alpha1.ReviewPending, PlanSHA256: digest, Revision: n, OpenedAt: &now,
		PostedBy: sc.poster(), Requester: reviewpolicy.Requester(sc.session)}
	recordRules(rs, rules)
	return rs
}

func recordRules(rs *agentsv1alpha1.ReviewStatus, rules reviewpolicy.Rules) {
	rs.Policy, rs.ApprovalsRequired, rs.SelfApproval = "", rules.Approvals, agentsv1alpha1.SelfApprovalAllowed
	if rules.Policy != "" {
		rs.Policy = rules.Namespace + "/" + rules.Policy
	}
	if rules.SelfApprovalForbidden {
		rs.SelfApproval = agentsv1alpha1.SelfApprovalForbidden
	}
}

// poster is the agent identity that may post plans for the session: its bound service account.
func (sc *sessionScope) poster() string {
	if b := sc.session.Spec.Agent; b != nil {
		return "system:serviceaccount:" + sc.session.Namespace + ":" + b.ServiceAccountName
	}
	return ""
}

// adoptReview gives a review opened before revisions were recorded its revision and opening
// time, and records the policy in force on every pass (a policy changed while a review is open
// applies to it).
func adoptReview(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, rules reviewpolicy.Rules, now metav1.Time) {
	rs := status.Review
	if rs.PlanSHA256 == "" {
		rs.PlanSHA256 = planmode.PlanSHA256(req.Plan)
	}
	if rs.Revision == 0 {
		rs.Revision, rs.OpenedAt = nextRevision(status), &now
		addRevision(status, req, rs.Revision, rs.PlanSHA256, now)
	}
	recordRules(rs, rules)
}

// decideReview judges the decisions on the plan under review and closes the review when they
// decide it: a counted decision to keep planning or to dismiss closes it at once; approvals
// close it once enough distinct approvers count. Consent is exactly one thing: decision Approve
// with no feedback; Approve carrying feedback is feedback, so it reads as keep-planning.
func (sc *sessionScope) decideReview(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, rules reviewpolicy.Rules, now metav1.Time) bool {
	rs := status.Review
	if refusal := sc.planChanged(rs.PlanSHA256, req); refusal != nil { // review_binding.go
		if len(reviewpolicy.DecisionsFor(sc.session, req.ID)) > 0 {
			sc.emitDecisionRefused(refusal)
		}
		return false
	}
	v := reviewpolicy.Judge(sc.session, req, rs.PlanSHA256, rs.Requester, rules)
	sc.recordVotes(rs, v)
	var deciders []string
	switch {
	case v.Closing != nil:
		d := v.Closing
		if d.Decision == agentsv1alpha1.ReviewDismiss {
			rs.Phase, rs.Message = agentsv1alpha1.ReviewDismissed, harness.ExitErrDismissed
		} else {
			rs.Phase, rs.Message = agentsv1alpha1.ReviewKeptPlanning, harness.KeepPlanningText(d.Feedback)
		}
		deciders = []string{usernameOf(d.DecidedBy)}
	case v.Approved():
		rs.Phase, rs.Message = agentsv1alpha1.ReviewApproved, harness.ExitApprovedText
		recordApprovedExit(&status.PlanMode, sc.openTurn())
		deciders = v.Approvers
	default:
		return false
	}
	rs.DecidedAt = &now
	closeRevision(status, rs, rs.Phase, deciders, now)
	sc.emit(corev1.EventTypeNormal, EventReasonReviewDecided, "Review",
		fmt.Sprintf("plan review %s (revision %d): %s by %s", req.ID, rs.Revision, rs.Phase, strings.Join(deciders, ", ")))
	return true
}

// recordVotes writes the judged votes into the review, and emits a Warning for each vote that
// does not count and was not reported before.
func (sc *sessionScope) recordVotes(rs *agentsv1alpha1.ReviewStatus, v reviewpolicy.Verdict) {
	before := map[string]bool{}
	for _, o := range rs.Votes {
		before[o.By.Username+"/"+string(o.Decision)+"/"+o.Reason] = true
	}
	rs.Votes, rs.Approvals = nil, int32(len(v.Approvers))
	for _, vote := range v.Votes {
		s := agentsv1alpha1.ReviewVoteStatus{Decision: vote.Decision, At: vote.DecidedAt, Counted: vote.Counted, Reason: vote.Refusal.String()}
		if vote.DecidedBy != nil {
			s.By = *vote.DecidedBy.DeepCopy()
		} else {
			s.By.Username = unstampedDecider
		}
		if !vote.Counted && !before[s.By.Username+"/"+string(s.Decision)+"/"+s.Reason] {
			sc.emitDecisionRefused(fmt.Errorf("the %s of %s on plan review %s (revision %d) does not count: %s", s.Decision, s.By.Username, rs.ID, rs.Revision, s.Reason))
		}
		if len(rs.Votes) < agentsv1alpha1.MaxReviewVotes {
			rs.Votes = append(rs.Votes, s)
		}
	}
}

// unstampedDecider names the author of a decision the admission webhook did not stamp (written
// before identities were recorded).
const unstampedDecider = "(not recorded)"

func usernameOf(a *agentsv1alpha1.Actor) string {
	if a == nil {
		return unstampedDecider
	}
	return a.Username
}

// recordApprovedExit is the harness's approval: pending := {active:false, narrate:false},
// overwriting any user pending. Nothing is appended now; the next step boundary appends
// plan/mode {false} with no notice (the tool result is the narration).
func recordApprovedExit(pm *agentsv1alpha1.PlanModeStatus, turn int64) {
	f := false
	pm.PendingActive = &f
	pm.PendingSource = agentsv1alpha1.PendingSourceExit
	pm.QueuedInTurn = turn
	pm.Pending = pm.Active
}

// expireReview closes a review nobody answered within spec.reviewTimeout, counted from when the
// manager opened it by its own clock (the agent's requestedAt plays no part: a skewed or
// forged clock must not move the deadline), and otherwise records when it will expire and asks
// to look again then.
func (sc *sessionScope) expireReview(status *agentsv1alpha1.AgentSessionStatus, req *agentsv1alpha1.PlanReviewRequest, now metav1.Time) ctrl.Result {
	rs := status.Review
	to := sc.session.Spec.ReviewTimeout
	if to == nil || to.Duration <= 0 {
		rs.ExpiresAt = nil
		return ctrl.Result{}
	}
	opened := now
	if rs.OpenedAt != nil {
		opened = *rs.OpenedAt
	}
	deadline := metav1.NewTime(opened.Add(to.Duration))
	if now.Before(&deadline) {
		rs.ExpiresAt = &deadline
		// Land just after the deadline, not on it.
		return ctrl.Result{RequeueAfter: deadline.Sub(now.Time) + 10*time.Millisecond}
	}
	rs.Phase, rs.Message, rs.DecidedAt, rs.ExpiresAt = agentsv1alpha1.ReviewExpired, ReviewExpiredText(to.Duration), &now, &deadline
	closeRevision(status, rs, agentsv1alpha1.ReviewExpired, nil, now)
	sc.emit(corev1.EventTypeNormal, EventReasonReviewExpired, "Review",
		fmt.Sprintf("plan review %s (revision %d) expired after %s without an answer", req.ID, rs.Revision, to.Duration))
	return ctrl.Result{}
}

func postedByText(rs *agentsv1alpha1.ReviewStatus) string {
	if rs.PostedBy == "" {
		return ""
	}
	return " by " + rs.PostedBy
}

// rulesText says what the review needs, for the ReviewOpened Event.
func rulesText(r reviewpolicy.Rules) string {
	if r.Approvals <= 1 && !r.SelfApprovalForbidden && len(r.Users) == 0 && len(r.Groups) == 0 {
		return "one approval"
	}
	s := fmt.Sprintf("%d distinct approvals (%s)", r.Approvals, r.Name())
	if r.SelfApprovalForbidden {
		s += ", not the requester's"
	}
	return s
}
