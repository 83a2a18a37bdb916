package webhooks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/reviewpolicy"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Decisions and selections carry the identity that took them (docs/review.md, "Identity"). The
// stamper (review_stamp.go) writes the stamps; these checks refuse a write whose stamps are not
// the requester's, so they hold even where the mutating webhook is missing, and they refuse a
// vote that could not count under the namespace's ReviewPolicy, naming the rule and the fix.

// stampSkew is how far a stamp's time may be from the validator's clock: the stamper and the
// validator may run in different manager replicas.
const stampSkew = 2 * time.Minute

const stampFix = "it is stamped by the admission webhook from the authenticated request (mutating-webhook-configuration), never chosen by the client: leave it out"

// validateDecisions checks the identity stamps of a write and its new decisions (spec.review,
// entries added to spec.reviewVotes): each names the plan under review and its text, was taken
// by the requester of this write, once, and can count under the policy. oldObj is empty at
// create. It also asks the authorizer for the approve verb when there is a new decision.
func (v *AgentSessionValidator) validateDecisions(ctx context.Context, req admission.Request, oldObj, obj *agentsv1alpha1.AgentSession) (field.ErrorList, error) {
	actor := actorOf(req.UserInfo)
	now := time.Now()
	errs := validateSelectionStamp(oldObj, obj, actor, now)
	votes := field.NewPath("spec", "reviewVotes")
	errs = append(errs, validateVotesKept(oldObj, obj, votes)...)
	var added []*field.Path
	var decisions []*agentsv1alpha1.ReviewDecision
	if d := obj.Spec.Review; d != nil && !equality.Semantic.DeepEqual(oldObj.Spec.Review, d) {
		added, decisions = append(added, field.NewPath("spec", "review")), append(decisions, d)
	}
	for _, i := range addedVotes(oldObj.Spec.ReviewVotes, obj.Spec.ReviewVotes) {
		added, decisions = append(added, votes.Index(i)), append(decisions, &obj.Spec.ReviewVotes[i])
	}
	if len(decisions) == 0 {
		return errs, nil
	}
	rules, err := policyRules(ctx, v.Policies, obj.Namespace)
	if err != nil {
		return nil, err
	}
	posted := agentReview(obj)
	for i, d := range decisions {
		p := added[i]
		errs = append(errs, validateStamp(p.Child("decidedBy"), p.Child("decidedAt"), d.DecidedBy, d.DecidedAt, actor, now)...)
		if p.String() != "spec.review" {
			errs = append(errs, validateVoteTarget(p, d, obj)...)
		}
		if len(errs) > 0 || posted == nil || posted.ID != d.ReviewID {
			continue
		}
		if prev := earlierDecision(obj, d); prev != nil {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("%q already decided review %q (%s at %s): a person decides a review once",
				actor.Username, d.ReviewID, prev.Decision, stampTime(prev.DecidedAt))))
			continue
		}
		if f := rules.Refuse(d, &actor, postedDigest(obj, posted), reviewpolicy.RequesterOf(obj, posted)); f != nil {
			errs = append(errs, field.Forbidden(p, "this decision cannot count: "+f.String()))
		}
	}
	errs = append(errs, v.validateApprovalExit(ctx, oldObj, obj, decisions)...)
	return errs, nil
}

// validateSelectionStamp: a changed spec.planMode.active carries the requester's stamp; an
// unchanged one keeps the stamp it had.
func validateSelectionStamp(oldObj, obj *agentsv1alpha1.AgentSession, actor agentsv1alpha1.Actor, now time.Time) field.ErrorList {
	o, n := oldObj.Spec.PlanMode, obj.Spec.PlanMode
	by, at := field.NewPath("spec", "planMode", "selectedBy"), field.NewPath("spec", "planMode", "selectedAt")
	if !sameActive(o.Active, n.Active) {
		return validateStamp(by, at, n.SelectedBy, n.SelectedAt, actor, now)
	}
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(o.SelectedBy, n.SelectedBy) {
		errs = append(errs, field.Forbidden(by, "records who last changed spec.planMode.active and changes only with it: "+stampFix))
	}
	if !equality.Semantic.DeepEqual(o.SelectedAt, n.SelectedAt) {
		errs = append(errs, field.Forbidden(at, "records when spec.planMode.active last changed and changes only with it: "+stampFix))
	}
	return errs
}

func validateStamp(byPath, atPath *field.Path, by *agentsv1alpha1.Actor, at *metav1.Time, actor agentsv1alpha1.Actor, now time.Time) field.ErrorList {
	// No stamp at all: the mutating webhook is not installed. Not a forgery: the decision then
	// counts only where identity does not matter (internal/reviewpolicy), and shows no decider.
	switch {
	case by == nil && at == nil:
		return nil
	case by == nil:
		return field.ErrorList{field.Required(byPath, "a stamped time needs the identity stamped with it: "+stampFix)}
	case !sameActor(*by, actor):
		return field.ErrorList{field.Forbidden(byPath, fmt.Sprintf("names %q, but this write was made by %q: %s", by.Username, actor.Username, stampFix))}
	case at == nil:
		return field.ErrorList{field.Required(atPath, "a stamped identity needs the time stamped with it: "+stampFix)}
	}
	if d := now.Sub(at.Time); d > stampSkew || d < -stampSkew {
		return field.ErrorList{field.Invalid(atPath, at.UTC().Format(time.RFC3339), "is not the time of this write: "+stampFix)}
	}
	return nil
}

// sameActor compares two identities as the API server reported them.
func sameActor(a, b agentsv1alpha1.Actor) bool {
	return a.Username == b.Username && a.UID == b.UID && slices.Equal(a.Groups, b.Groups)
}

func stampTime(t *metav1.Time) string {
	if t == nil {
		return "an unrecorded time"
	}
	return t.UTC().Format(time.RFC3339)
}

// validateVotesKept: votes on the plan under review are append-only while its review is open,
// so no approval can be withdrawn or rewritten behind the reviewers' backs. Votes naming any
// other review may be dropped.
func validateVotesKept(oldObj, obj *agentsv1alpha1.AgentSession, p *field.Path) field.ErrorList {
	posted := agentReview(obj)
	if posted == nil || reviewClosed(obj, posted.ID) {
		return nil
	}
	var errs field.ErrorList
	if o := oldObj.Spec.Review; o != nil && o.ReviewID == posted.ID && !equality.Semantic.DeepEqual(o, obj.Spec.Review) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "review"), fmt.Sprintf(
			"holds %s on the open review %q, which cannot change while it is open: add a decision to spec.reviewVotes instead (kubectl plan approve|revise|dismiss do)",
			voteOf(o), posted.ID)))
	}
	for _, i := range addedVotes(obj.Spec.ReviewVotes, oldObj.Spec.ReviewVotes) { // the stored votes the write drops
		if d := &oldObj.Spec.ReviewVotes[i]; d.ReviewID == posted.ID {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("%s on review %q was removed or changed: votes on the plan under review cannot change while it is open; "+
				"append a vote instead (kubectl plan approve|revise|dismiss)", voteOf(d), posted.ID)))
		}
	}
	return errs
}

// validateVoteTarget: a new vote names the plan under review now, whose review is still open,
// and (if it names one) the digest of that plan's text.
func validateVoteTarget(p *field.Path, d *agentsv1alpha1.ReviewDecision, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	posted := agentReview(obj)
	id := p.Child("reviewID")
	switch {
	case reviewClosed(obj, d.ReviewID):
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("review %q is already closed (%s): a decision cannot be added once the manager has acted on it", d.ReviewID, obj.Status.Review.Phase))}
	case posted == nil:
		return field.ErrorList{field.Invalid(id, d.ReviewID, "no plan is under review (status.agent.review is empty): a decision must quote the id of a posted plan")}
	case posted.ID != d.ReviewID:
		return field.ErrorList{field.Invalid(id, d.ReviewID, fmt.Sprintf("the plan under review is %q (status.agent.review.id): a decision must quote that id", posted.ID))}
	}
	if want := postedDigest(obj, posted); d.PlanSHA256 != "" && d.PlanSHA256 != want {
		return field.ErrorList{field.Invalid(p.Child("planSHA256"), d.PlanSHA256, fmt.Sprintf(
			"is not the digest of the plan under review %q (%s): the plan is not the one read; read it again with kubectl plan review %s", d.ReviewID, want, obj.Name))}
	}
	return nil
}

func voteOf(d *agentsv1alpha1.ReviewDecision) string {
	if d.DecidedBy == nil {
		return "an unstamped " + string(d.Decision)
	}
	return fmt.Sprintf("the %s of %q", d.Decision, d.DecidedBy.Username)
}

func reviewClosed(obj *agentsv1alpha1.AgentSession, id string) bool {
	st := obj.Status.Review
	return st != nil && st.ID == id && st.Phase != agentsv1alpha1.ReviewPending && st.Phase != ""
}

// earlierDecision is another decision (spec.review, or another entry of spec.reviewVotes) the
// same person took on d's review, or nil. d points into obj's spec.
func earlierDecision(obj *agentsv1alpha1.AgentSession, d *agentsv1alpha1.ReviewDecision) *agentsv1alpha1.ReviewDecision {
	same := func(o *agentsv1alpha1.ReviewDecision) bool {
		return o != d && o.ReviewID == d.ReviewID && o.DecidedBy != nil && o.DecidedBy.Username == d.DecidedBy.Username
	}
	if o := obj.Spec.Review; o != nil && same(o) {
		return o
	}
	for i := range obj.Spec.ReviewVotes {
		if o := &obj.Spec.ReviewVotes[i]; same(o) {
			return o
		}
	}
	return nil
}

// postedDigest is the digest of the plan under review as the manager recorded it when it
// opened the review, or of the posted text before it has.
func postedDigest(obj *agentsv1alpha1.AgentSession, posted *agentsv1alpha1.PlanReviewRequest) string {
	if rs := obj.Status.Review; rs != nil && rs.ID == posted.ID && rs.PlanSHA256 != "" {
		return rs.PlanSHA256
	}
	return planmode.PlanSHA256(posted.Plan)
}

// validateApprovalExit: the approval that completes a review leaves plan mode, so the object
// it writes must not select plan mode (the stamper sets spec.planMode.active to false); an
// approval that does not complete it yet (a policy needing more approvers) must not deselect
// plan mode in the same write, or the session would leave plan mode before the review is
// approved. Called only for a write that adds decisions.
func (v *AgentSessionValidator) validateApprovalExit(ctx context.Context, oldObj, obj *agentsv1alpha1.AgentSession, decisions []*agentsv1alpha1.ReviewDecision) field.ErrorList {
	approves := false
	for _, d := range decisions {
		approves = approves || reviewpolicy.IsApproval(d)
	}
	if !approves {
		return nil
	}
	active := field.NewPath("spec", "planMode", "active")
	verdict, err := verdictOf(ctx, v.Policies, obj)
	if err != nil || verdict == nil {
		return nil // no plan under review: refused above
	}
	now, was := obj.Spec.PlanMode.Active, oldObj.Spec.PlanMode.Active
	switch {
	case verdict.Approved() && now != nil && *now:
		return field.ErrorList{field.Invalid(active, true,
			"approving a plan leaves plan mode: set spec.planMode.active to false in the same patch (the mutating admission webhook does; kubectl plan approve needs nothing else)")}
	case !verdict.Approved() && now != nil && !*now && (was == nil || *was):
		return field.ErrorList{field.Invalid(active, false, fmt.Sprintf(
			"this approval is not the last one the review needs (%d more approval(s) needed): it does not leave plan mode yet, "+
				"so leave spec.planMode.active as it is; the approval that completes the review sets it",
			verdict.Missing()))}
	}
	return nil
}

// decisionAdded reports a write that adds a decision: a new or changed spec.review, or an entry
// appended to spec.reviewVotes.
func decisionAdded(oldObj, obj *agentsv1alpha1.AgentSession) bool {
	if obj.Spec.Review != nil && reviewChanged(oldObj, obj) {
		return true
	}
	return len(addedVotes(oldObj.Spec.ReviewVotes, obj.Spec.ReviewVotes)) > 0
}
