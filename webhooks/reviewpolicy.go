package webhooks

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// ReviewPolicyPath is where the ReviewPolicy validator is served.
const ReviewPolicyPath = "/validate-agents-harness-dev-v1alpha1-reviewpolicy"

var rpGK = agentsv1alpha1.GroupVersion.WithKind("ReviewPolicy").GroupKind()

// ReviewPolicyValidator checks a ReviewPolicy as a whole: one per namespace (named default), and
// rules that can be met (docs/review.md, "Policy").
type ReviewPolicyValidator struct{}

var _ admission.Validator[*agentsv1alpha1.ReviewPolicy] = ReviewPolicyValidator{}

// ValidateCreate implements admission.Validator.
func (ReviewPolicyValidator) ValidateCreate(_ context.Context, p *agentsv1alpha1.ReviewPolicy) (admission.Warnings, error) {
	return nil, invalidReviewPolicy(p.Name, ValidateReviewPolicy(p))
}

// ValidateUpdate implements admission.Validator.
func (ReviewPolicyValidator) ValidateUpdate(_ context.Context, _, p *agentsv1alpha1.ReviewPolicy) (admission.Warnings, error) {
	return nil, invalidReviewPolicy(p.Name, ValidateReviewPolicy(p))
}

// ValidateDelete implements admission.Validator (deletes are not intercepted).
func (ReviewPolicyValidator) ValidateDelete(context.Context, *agentsv1alpha1.ReviewPolicy) (admission.Warnings, error) {
	return nil, nil
}

// ValidateReviewPolicy returns every problem of p, each with its field path and the fix.
func ValidateReviewPolicy(p *agentsv1alpha1.ReviewPolicy) field.ErrorList {
	var errs field.ErrorList
	if p.Name != agentsv1alpha1.DefaultReviewPolicyName {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), p.Name, fmt.Sprintf(
			"a namespace has one ReviewPolicy, named %q, which governs every AgentSession in it: name this one %q "+
				"(sessions cannot choose a policy, so the people who toggle plan mode cannot pick a laxer one)",
			agentsv1alpha1.DefaultReviewPolicyName, agentsv1alpha1.DefaultReviewPolicyName)))
	}
	spec := field.NewPath("spec")
	n := p.Spec.Approvals
	if n < 1 || n > agentsv1alpha1.MaxPolicyApprovals {
		errs = append(errs, field.Invalid(spec.Child("approvals"), n, fmt.Sprintf("must be between 1 and %d distinct approvers", agentsv1alpha1.MaxPolicyApprovals)))
	}
	switch p.Spec.SelfApproval {
	case "", agentsv1alpha1.SelfApprovalAllowed, agentsv1alpha1.SelfApprovalForbidden:
	default:
		errs = append(errs, field.NotSupported(spec.Child("selfApproval"), p.Spec.SelfApproval, []string{string(agentsv1alpha1.SelfApprovalAllowed), string(agentsv1alpha1.SelfApprovalForbidden)}))
	}
	if a := p.Spec.Approvers; a != nil {
		ap := spec.Child("approvers")
		errs = append(errs, validateNames(ap.Child("users"), a.Users, "username")...)
		errs = append(errs, validateNames(ap.Child("groups"), a.Groups, "group")...)
		switch {
		case len(a.Users) == 0 && len(a.Groups) == 0:
			errs = append(errs, field.Required(ap, "name at least one user or group who may approve, or remove spec.approvers to let anyone with the approve verb approve"))
		case len(a.Groups) == 0 && int32(len(a.Users)) < n:
			errs = append(errs, field.Invalid(spec.Child("approvals"), n, fmt.Sprintf(
				"needs %d distinct approvers, but spec.approvers names only %d user(s) and no group: no plan could ever be approved; lower spec.approvals or name more approvers", n, len(a.Users))))
		}
	}
	return errs
}

func validateNames(p *field.Path, names []string, what string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, s := range names {
		switch {
		case strings.TrimSpace(s) != s || s == "":
			errs = append(errs, field.Invalid(p.Index(i), s, fmt.Sprintf("a %s is matched exactly as the API server authenticates it: remove the surrounding spaces", what)))
		case seen[s]:
			errs = append(errs, field.Duplicate(p.Index(i), s))
		}
		seen[s] = true
	}
	return errs
}

func invalidReviewPolicy(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(rpGK, name, errs)
}
