// Package reviewpolicy judges the decisions on a plan under review against the namespace's
// ReviewPolicy: which votes count, how many approvals the plan has and needs, and whether the
// review closes. The admission webhook (to refuse a vote that cannot count, with the rule and
// the fix), the manager (to close the review) and kubectl plan (to say how many approvals are
// still needed) all call it, so the three never disagree on a rule. docs/review.md describes
// the rules.
package reviewpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Rules are a ReviewPolicy's rules with its defaults applied. The zero policy (none in the
// namespace) is one approval by anyone who holds the approve verb, the requester included.
type Rules struct {
	// Policy is the ReviewPolicy's name; "" when the namespace has none.
	Policy string
	// Namespace of the policy, for messages.
	Namespace string
	// Approvals is how many distinct approvers a plan needs (at least 1).
	Approvals int32
	// Users and Groups who may approve; both empty: anyone with the verb.
	Users, Groups []string
	// SelfApprovalForbidden refuses the requester's approval.
	SelfApprovalForbidden bool
	// AllowWithoutDigest counts an approval that names no planSHA256.
	AllowWithoutDigest bool
}

// RulesOf returns the rules of policy p (nil: the namespace has none).
func RulesOf(p *v1alpha1.ReviewPolicy) Rules {
	if p == nil {
		return Rules{Approvals: 1}
	}
	r := Rules{Policy: p.Name, Namespace: p.Namespace, Approvals: p.Spec.Approvals,
		SelfApprovalForbidden: p.Spec.SelfApproval == v1alpha1.SelfApprovalForbidden,
		AllowWithoutDigest:    p.Spec.AllowApprovalWithoutDigest}
	if r.Approvals < 1 {
		r.Approvals = 1
	}
	if a := p.Spec.Approvers; a != nil {
		r.Users, r.Groups = a.Users, a.Groups
	}
	return r
}

// Name is how messages name the policy: "ReviewPolicy team-a/default", or "no ReviewPolicy".
func (r Rules) Name() string {
	if r.Policy == "" {
		return "no ReviewPolicy"
	}
	return "ReviewPolicy " + r.Namespace + "/" + r.Policy
}

// identityMatters: a vote must name who took it for these rules to judge it.
func (r Rules) identityMatters() bool {
	return r.Approvals > 1 || len(r.Users) > 0 || len(r.Groups) > 0 || r.SelfApprovalForbidden
}

// Requester is who selected plan mode on for the work a plan answers: the identity stamped in
// spec.planMode.selectedBy while spec.planMode.active is true. Nil when none is recorded (plan
// mode inherited through a fork, or selected before identities were stamped, or a selection
// of plan mode off since).
func Requester(s *v1alpha1.AgentSession) *v1alpha1.Actor {
	pm := s.Spec.PlanMode
	if pm.Active == nil || !*pm.Active || pm.SelectedBy == nil {
		return nil
	}
	return pm.SelectedBy.DeepCopy()
}

// RequesterOf is the requester of the review of plan req: the one the manager recorded when it
// opened the review, or, before it has, the one it will record.
func RequesterOf(s *v1alpha1.AgentSession, req *v1alpha1.PlanReviewRequest) *v1alpha1.Actor {
	if rs := s.Status.Review; rs != nil && req != nil && rs.ID == req.ID && rs.OpenedAt != nil {
		return rs.Requester
	}
	return Requester(s)
}

// IsApproval reports a decision that consents: Approve without feedback (Approve with feedback
// is feedback, as in the harness).
func IsApproval(d *v1alpha1.ReviewDecision) bool {
	return d.Decision == v1alpha1.ReviewApprove && d.Feedback == ""
}

// Refusal is why a decision does not count: the rule it breaks and what to do instead.
type Refusal struct {
	Rule, Fix string
}

func (f *Refusal) String() string {
	if f == nil {
		return ""
	}
	return f.Rule + ": " + f.Fix
}

// Refuse reports why decision d, taken by by, cannot count on the plan under review (whose
// recorded digest is digest and whose requester is requester), or nil. It checks the rules
// that hold for one decision alone; Judge also refuses a second decision by the same person.
func (r Rules) Refuse(d *v1alpha1.ReviewDecision, by *v1alpha1.Actor, digest string, requester *v1alpha1.Actor) *Refusal {
	if d.PlanSHA256 != "" && d.PlanSHA256 != digest {
		return &Refusal{Rule: fmt.Sprintf("it names the SHA-256 %s, and the plan under review %q is %s: it was taken on another text", d.PlanSHA256, d.ReviewID, digest),
			Fix: "read the plan again (kubectl plan review) and decide again"}
	}
	if by == nil && r.identityMatters() {
		return &Refusal{Rule: fmt.Sprintf("it names no identity that took it (decidedBy is stamped by the admission webhook), and %s judges who decided", r.Name()),
			Fix: "decide again with kubectl plan approve|revise|dismiss"}
	}
	if !IsApproval(d) {
		return nil // keeping planning and dismissing are not consent: anyone with the verb may
	}
	if d.PlanSHA256 == "" && !r.AllowWithoutDigest {
		return &Refusal{Rule: "an approval must name the SHA-256 of the plan text it approves (planSHA256), so it never applies to a text the reviewer did not read",
			Fix: "approve with kubectl plan approve, which names it (or set allowApprovalWithoutDigest in the namespace's ReviewPolicy)"}
	}
	if by == nil {
		return nil
	}
	if (len(r.Users) > 0 || len(r.Groups) > 0) && !slices.Contains(r.Users, by.Username) && !anyIn(by.Groups, r.Groups) {
		return &Refusal{Rule: fmt.Sprintf("%s (spec.approvers) lets only %s approve, and %q is neither", r.Name(), r.approversText(), by.Username),
			Fix: "ask one of them to approve, or ask the policy's owners to add you to spec.approvers"}
	}
	if r.SelfApprovalForbidden && requester != nil && requester.Username == by.Username {
		return &Refusal{Rule: fmt.Sprintf("%q selected plan mode for this work (spec.planMode.selectedBy), so is its requester, "+
			"and %s forbids approving your own request (spec.selfApproval: Forbidden)", by.Username, r.Name()),
			Fix: "ask another approver"}
	}
	return nil
}

func (r Rules) approversText() string {
	var parts []string
	if len(r.Users) > 0 {
		parts = append(parts, "users "+strings.Join(r.Users, ", "))
	}
	if len(r.Groups) > 0 {
		parts = append(parts, "members of "+strings.Join(r.Groups, ", "))
	}
	return strings.Join(parts, " and ")
}

func anyIn(have, want []string) bool {
	for _, g := range have {
		if slices.Contains(want, g) {
			return true
		}
	}
	return false
}

// Vote is one decision on the plan under review, as judged.
type Vote struct {
	v1alpha1.ReviewDecision
	// Counted: the decision counts under the rules.
	Counted bool
	// Refusal says why it does not.
	Refusal *Refusal
}

// Verdict is where the review stands under the rules.
type Verdict struct {
	// Votes naming the plan under review, in the order they were admitted.
	Votes []Vote
	// Approvers are the distinct usernames whose approvals count ("" stands for one unstamped
	// approval, counted only where identity does not matter).
	Approvers []string
	// Required approvals.
	Required int32
	// Closing is the first counted decision that is not an approval (keep planning, dismiss):
	// it closes the review whatever the approvals.
	Closing *Vote
}

// Approved reports that the review is approved: enough distinct approvers, and no counted
// decision to keep planning or to dismiss.
func (v Verdict) Approved() bool {
	return v.Closing == nil && int32(len(v.Approvers)) >= v.Required
}

// Missing is how many more approvals are needed (0 once approved).
func (v Verdict) Missing() int32 {
	if n := v.Required - int32(len(v.Approvers)); n > 0 {
		return n
	}
	return 0
}

// Judge reads every decision on the plan under review req (spec.review and spec.reviewVotes
// naming its id) and judges it: digest is the digest recorded for the plan, requester its
// requester. A person counts once: a later decision of theirs does not count.
func Judge(s *v1alpha1.AgentSession, req *v1alpha1.PlanReviewRequest, digest string, requester *v1alpha1.Actor, rules Rules) Verdict {
	v := Verdict{Required: rules.Approvals}
	if req == nil {
		return v
	}
	seen := map[string]bool{}
	for _, d := range DecisionsFor(s, req.ID) {
		vote := Vote{ReviewDecision: d}
		vote.Refusal = rules.Refuse(&d, d.DecidedBy, digest, requester)
		if vote.Refusal == nil && d.DecidedBy != nil && seen[d.DecidedBy.Username] {
			vote.Refusal = &Refusal{Rule: fmt.Sprintf("%q already decided this review", d.DecidedBy.Username), Fix: "a person decides a review once"}
		}
		if vote.Refusal == nil {
			vote.Counted = true
			by := ""
			if d.DecidedBy != nil {
				by = d.DecidedBy.Username
				seen[by] = true
			}
			if IsApproval(&d) {
				v.Approvers = append(v.Approvers, by)
			} else if v.Closing == nil {
				c := vote
				v.Closing = &c
			}
		}
		v.Votes = append(v.Votes, vote)
	}
	return v
}

// DecisionsFor returns the decisions naming review id, in the order the webhook admitted them
// (decidedAt; unstamped ones last, in spec order: spec.review, then spec.reviewVotes).
func DecisionsFor(s *v1alpha1.AgentSession, id string) []v1alpha1.ReviewDecision {
	var out []v1alpha1.ReviewDecision
	if d := s.Spec.Review; d != nil && d.ReviewID == id {
		out = append(out, *d)
	}
	for _, d := range s.Spec.ReviewVotes {
		if d.ReviewID == id {
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].DecidedAt, out[j].DecidedAt
		switch {
		case a == nil:
			return false
		case b == nil:
			return true
		}
		return a.Before(b)
	})
	return out
}

// VotedBy returns the decision user already took on review id, if any.
func VotedBy(s *v1alpha1.AgentSession, id, user string) *v1alpha1.ReviewDecision {
	for _, d := range DecisionsFor(s, id) {
		if d.DecidedBy != nil && d.DecidedBy.Username == user {
			return &d
		}
	}
	return nil
}
