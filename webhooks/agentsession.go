package webhooks

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// AgentSessionPath is where the AgentSession validator is served (spec writes and the status
// subresource both come here; req.SubResource tells them apart).
const AgentSessionPath = "/validate-agents-harness-dev-v1alpha1-agentsession"

// Review approval is its own permission, like certificatesigningrequests/approval: the verb
// "approve" on the virtual subresource agentsessions/review, checked with a SubjectAccessReview.
const (
	ReviewApprovalVerb        = "approve"
	ReviewApprovalSubresource = "review"
)

// MaxIDLength caps review and message IDs (the CRD's MaxLength for both).
const MaxIDLength = 128

// idPattern is the format of review and message IDs: letters and digits, with . _ : - inside.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?$`)

const idFormatMsg = "must be 1-128 characters: letters, digits and . _ : - (starting and ending with a letter or digit)"

var (
	asGR = agentsv1alpha1.AgentSessionResource.GroupResource()
	asGK = agentsv1alpha1.AgentSessionKind.GroupKind()
)

// AccessChecker answers "may this user do this?" (a SubjectAccessReview in the cluster).
type AccessChecker interface {
	Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error)
}

// SubjectAccessReviewer is the AccessChecker backed by the API server's authorizer.
type SubjectAccessReviewer struct {
	Client client.Client
}

// Allowed implements AccessChecker.
func (s SubjectAccessReviewer) Allowed(ctx context.Context, u authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra, ResourceAttributes: &attrs,
	}}
	if err := s.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("creating SubjectAccessReview for %q: %w", u.Username, err)
	}
	return sar.Status.Allowed, nil
}

// AgentSessionValidator checks what the CRD's schema and CEL rules cannot: names that must be
// object names, review and message IDs against the status, who may write which part of status,
// that agents do not write spec, and the size budget. Its checks fail closed: one whose
// dependency is missing refuses the write (errMissingDependency).
type AgentSessionValidator struct {
	Identities Identities
	// Access checks the review-approval permission (a SubjectAccessReview in a cluster).
	Access AccessChecker
	// Sessions lists AgentSessions on the API server itself, by the CRD's selectable fields,
	// for the checks that need every session (tenancy.go): never a shard's cache, so every
	// manager that serves admission answers the same.
	Sessions client.Reader
	// RequireAgentBinding refuses sessions without spec.agent, two sessions naming one agent
	// service account, and status.agent writes to unbound sessions. The default; off is an
	// explicit choice the webhook warns about on every unbound session.
	RequireAgentBinding bool
	// Policies reads ReviewPolicies (the API reader, as Sessions) for the review checks
	// (review_votes.go). Nil: every namespace has none.
	Policies client.Reader
}

// errMissingDependency refuses a write whose check cannot run: a validator built without what
// the check needs never admits what it could not judge.
func errMissingDependency(what string) error {
	return apierrors.NewInternalError(fmt.Errorf("the AgentSession webhook was set up without %s, so it cannot check this write; it refuses it (webhooks.SetupWithManager sets it up)", what))
}

var _ admission.Validator[*agentsv1alpha1.AgentSession] = &AgentSessionValidator{}

// ValidateCreate implements admission.Validator.
func (v *AgentSessionValidator) ValidateCreate(ctx context.Context, obj *agentsv1alpha1.AgentSession) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no admission request in context: %w", err))
	}
	if err := v.denyAgentSpecWrite(req, obj.Name, obj); err != nil {
		return nil, err
	}
	if err := v.validateSize(req, nil, obj); err != nil {
		return nil, err
	}
	errs := validateSpecFields(&obj.Spec)
	errs = append(errs, validateSteerQueue(nil, obj)...)
	inUse, err := v.validateSessionIDFree(ctx, obj)
	if err != nil {
		return nil, err
	}
	errs = append(errs, inUse...)
	fork, err := v.validateForkParent(ctx, obj)
	if err != nil {
		return nil, err
	}
	errs = append(errs, fork...)
	binding, err := v.validateAgentBinding(ctx, nil, obj)
	if err != nil {
		return nil, err
	}
	errs = append(errs, binding...)
	warnings := v.unboundWarning(obj)
	if obj.Spec.Review != nil {
		warnings = append(warnings, "spec.review is set at creation, before any plan was posted: it applies only if the agent later posts a review with this reviewID")
		if err := v.checkApproval(ctx, req, obj); err != nil {
			return warnings, err
		}
		errs = append(errs, validateApprovalLeavesPlanMode(&obj.Spec)...)
	}
	decisions, err := v.validateDecisions(ctx, req, &agentsv1alpha1.AgentSession{}, obj) // review_votes.go
	if err != nil {
		return warnings, err
	}
	errs = append(errs, decisions...)
	return warnings, invalidAgentSession(obj.Name, errs)
}

// ValidateUpdate implements admission.Validator: the status subresource for status ownership,
// the main resource for spec rules.
func (v *AgentSessionValidator) ValidateUpdate(ctx context.Context, oldObj, obj *agentsv1alpha1.AgentSession) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("no admission request in context: %w", err))
	}
	if req.SubResource == "status" {
		if err := v.validateStatusUpdate(req, oldObj, obj); err != nil {
			return nil, err
		}
		return nil, v.validateSize(req, oldObj, obj)
	}
	// Metadata counts against the budget too; a write that does not grow the session passes.
	if err := v.validateSize(req, oldObj, obj); err != nil {
		return nil, err
	}
	if equality.Semantic.DeepEqual(oldObj.Spec, obj.Spec) {
		// Ratcheting: metadata-only updates (labels, finalizers) are not re-judged, so a session
		// stored before a rule existed can still be finalized and deleted.
		return nil, nil
	}
	if err := v.denyAgentSpecWrite(req, obj.Name, oldObj, obj); err != nil {
		return nil, err
	}
	errs := validateSpecFields(&obj.Spec)
	errs = append(errs, validateReviewTransition(oldObj, obj)...)
	errs = append(errs, validateSteerQueue(oldObj, obj)...)
	binding, err := v.validateAgentBinding(ctx, oldObj, obj)
	if err != nil {
		return nil, err
	}
	errs = append(errs, binding...)
	warnings := append(v.unbindingWarning(oldObj, obj), reviewDigestWarning(oldObj, obj)...)
	if r := obj.Spec.Review; r != nil && r.Feedback != "" && r.Decision != agentsv1alpha1.ReviewKeepPlanning && reviewChanged(oldObj, obj) {
		if r.Decision == agentsv1alpha1.ReviewApprove {
			// The harness's consent rule (controllers/review.go): Approve with text is feedback.
			warnings = append(warnings, "spec.review.feedback with decision Approve is not consent: "+
				"the manager reads it as KeepPlanning and sends the feedback to the model; approve without feedback to approve")
		} else {
			warnings = append(warnings, fmt.Sprintf("spec.review.feedback is sent to the model only with decision KeepPlanning; it is ignored with %s", r.Decision))
		}
	}
	if len(errs) > 0 {
		return warnings, invalidAgentSession(obj.Name, errs)
	}
	if decisionAdded(oldObj, obj) {
		if err := v.checkApproval(ctx, req, obj); err != nil {
			return warnings, err
		}
	}
	decisions, err := v.validateDecisions(ctx, req, oldObj, obj) // review_votes.go
	if err != nil {
		return warnings, err
	}
	return warnings, invalidAgentSession(obj.Name, decisions)
}

// ValidateDelete implements admission.Validator (deletes are not intercepted).
func (v *AgentSessionValidator) ValidateDelete(context.Context, *agentsv1alpha1.AgentSession) (admission.Warnings, error) {
	return nil, nil
}

func (v *AgentSessionValidator) denyAgentSpecWrite(req admission.Request, name string, objs ...*agentsv1alpha1.AgentSession) error {
	agent, _ := v.Identities.IsAgent(req.UserInfo) // an agent of any namespace, or of none
	if (agent || isBoundAgent(req.UserInfo.Username, objs...)) && !v.Identities.IsManager(req.UserInfo) {
		return apierrors.NewForbidden(asGR, name, field.ErrorList{field.Forbidden(field.NewPath("spec"),
			fmt.Sprintf("agent identity %q may not create sessions or change spec: an agent writes only status.agent (the status subresource)", req.UserInfo.Username)),
		}.ToAggregate())
	}
	return nil
}

// validateStatusUpdate keeps each writer to its own part of the status: the manager writes all
// of it; anyone else (the agent pod) only status.agent. RBAC decides who may reach the status
// subresource at all (config/rbac: the manager and agent roles only).
func (v *AgentSessionValidator) validateStatusUpdate(req admission.Request, oldObj, obj *agentsv1alpha1.AgentSession) error {
	u := req.UserInfo
	if v.Identities.IsManager(u) {
		return nil
	}
	if agent, in := v.Identities.IsAgent(u); agent && !in.Has(obj.Namespace) {
		return apierrors.NewForbidden(asGR, obj.Name, field.ErrorList{field.Forbidden(field.NewPath("status"), agentElsewhere(u.Username, in, obj.Namespace, v.Identities.AgentGroups))}.ToAggregate())
	}
	var errs field.ErrorList
	o, n := oldObj.Status, obj.Status
	status := field.NewPath("status")
	owner := fmt.Sprintf("only the manager (%s) may change this field; %q may change only status.agent",
		strings.Join(v.Identities.ManagerUsernames, ", "), u.Username)
	if !equality.Semantic.DeepEqual(o.PlanMode, n.PlanMode) {
		errs = append(errs, field.Forbidden(status.Child("planMode"), owner))
	}
	if !equality.Semantic.DeepEqual(o.Review, n.Review) {
		errs = append(errs, field.Forbidden(status.Child("review"), owner))
	}
	if !equality.Semantic.DeepEqual(o.Conditions, n.Conditions) {
		errs = append(errs, field.Forbidden(status.Child("conditions"), owner))
	}
	if o.ObservedGeneration != n.ObservedGeneration {
		errs = append(errs, field.Forbidden(status.Child("observedGeneration"), owner))
	}
	// Any status field added later is the manager's unless listed here.
	o.PlanMode, n.PlanMode, o.Review, n.Review, o.Agent, n.Agent = agentsv1alpha1.PlanModeStatus{}, agentsv1alpha1.PlanModeStatus{}, nil, nil, nil, nil
	o.Conditions, n.Conditions, o.ObservedGeneration, n.ObservedGeneration = nil, nil, 0, 0
	if !equality.Semantic.DeepEqual(o, n) {
		errs = append(errs, field.Forbidden(status, owner))
	}
	errs = append(errs, v.validateAgentWriter(req, oldObj, obj)...)
	if len(errs) > 0 {
		return apierrors.NewForbidden(asGR, obj.Name, errs.ToAggregate())
	}
	if a := obj.Status.Agent; a != nil {
		var verrs field.ErrorList
		if a.Review != nil {
			verrs = append(verrs, validateID(status.Child("agent", "review", "id"), a.Review.ID)...)
		}
		verrs = append(verrs, validatePlanUnchanged(oldObj, obj)...)
		verrs = append(verrs, validatePostedPlan(oldObj, obj)...) // review_plan.go
		verrs = append(verrs, validateSteerID(oldObj, obj)...)
		if len(verrs) > 0 {
			return invalidAgentSession(obj.Name, verrs)
		}
	}
	return nil
}

func validateSpecFields(spec *agentsv1alpha1.AgentSessionSpec) field.ErrorList {
	var errs field.ErrorList
	if ref := spec.PlanMode.ConfigRef; ref != nil {
		p := field.NewPath("spec", "planMode", "configRef", "name")
		for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(p, ref.Name, "must name a PlanModeConfig, so it must be a valid object name: "+msg))
		}
	}
	if r := spec.Review; r != nil {
		errs = append(errs, validateID(field.NewPath("spec", "review", "reviewID"), r.ReviewID)...)
	}
	errs = append(errs, validateReviewTimeout(spec)...)
	seen := map[string]bool{}
	for i, m := range spec.SteerQueue {
		p := field.NewPath("spec", "steerQueue").Index(i)
		errs = append(errs, validateID(p.Child("id"), m.ID)...)
		if seen[m.ID] {
			errs = append(errs, field.Duplicate(p.Child("id"), m.ID))
		}
		seen[m.ID] = true
		if strings.TrimSpace(m.Text) == "" && len(m.Images) == 0 {
			errs = append(errs, field.Required(p.Child("text"), "a queued message needs text that is not blank, or images"))
		}
	}
	return errs
}

func validateID(p *field.Path, id string) field.ErrorList {
	if len(id) > MaxIDLength || !idPattern.MatchString(id) {
		return field.ErrorList{field.Invalid(p, id, idFormatMsg)}
	}
	return nil
}

func reviewChanged(oldObj, obj *agentsv1alpha1.AgentSession) bool {
	return !equality.Semantic.DeepEqual(oldObj.Spec.Review, obj.Spec.Review)
}

// validateReviewTransition: a new or changed decision must answer the plan under review now
// (status.agent.review.id), so a decision for an older plan never lands on a newer one, and a
// review the manager has already closed cannot be re-decided.
func validateReviewTransition(oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	r := obj.Spec.Review
	if r == nil || !reviewChanged(oldObj, obj) {
		return nil
	}
	p := field.NewPath("spec", "review", "reviewID")
	if st := obj.Status.Review; st != nil && st.ID == r.ReviewID && st.Phase != agentsv1alpha1.ReviewPending && st.Phase != "" {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "review"),
			fmt.Sprintf("review %q is already closed (%s): a decision cannot be changed once the manager has acted on it", r.ReviewID, st.Phase))}
	}
	posted := obj.Status.Agent
	if posted == nil || posted.Review == nil {
		return field.ErrorList{field.Invalid(p, r.ReviewID,
			"no plan is under review (status.agent.review is empty): a decision must quote the id of a posted plan")}
	}
	if posted.Review.ID != r.ReviewID {
		return field.ErrorList{field.Invalid(p, r.ReviewID,
			fmt.Sprintf("the plan under review is %q (status.agent.review.id): a decision must quote that id", posted.Review.ID))}
	}
	return validateReviewDigest(oldObj, obj)
}

// validateApprovalLeavesPlanMode: an approval (decision Approve without feedback, the only
// consent) takes the session out of plan mode, so it must also record that the user no longer
// selects plan mode. The manager reacts only to a changed spec.planMode.active; were it left at
// true after the approved exit, a later "active: true" would change nothing and the user's
// selection would be lost. Unset is fine (a fork that inherited plan mode selected nothing).
// Called only when spec.review is new or changed, after the approval permission check.
func validateApprovalLeavesPlanMode(spec *agentsv1alpha1.AgentSessionSpec) field.ErrorList {
	r, active := spec.Review, spec.PlanMode.Active
	if r == nil || r.Decision != agentsv1alpha1.ReviewApprove || r.Feedback != "" || active == nil || !*active {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "planMode", "active"), true,
		"approving a plan leaves plan mode: set spec.planMode.active to false in the same patch (kubectl plan approve does)")}
}

// checkApproval asks the authorizer whether the requesting user may approve reviews of this
// session. The manager never decides reviews, so it gets no bypass.
func (v *AgentSessionValidator) checkApproval(ctx context.Context, req admission.Request, obj *agentsv1alpha1.AgentSession) error {
	if v.Access == nil {
		return errMissingDependency("an access checker for the review-approval permission")
	}
	allowed, err := v.Access.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Namespace: obj.Namespace, Verb: ReviewApprovalVerb, Group: agentsv1alpha1.AgentSessionResource.Group,
		Version: agentsv1alpha1.AgentSessionResource.Version, Resource: agentsv1alpha1.AgentSessionResource.Resource,
		Subresource: ReviewApprovalSubresource, Name: obj.Name,
	})
	if err != nil {
		logf.FromContext(ctx).Error(err, "review approval check failed", "user", req.UserInfo.Username, "agentSession", obj.Name)
		return apierrors.NewServiceUnavailable("could not check the review-approval permission; retry: " + err.Error())
	}
	if !allowed {
		return apierrors.NewForbidden(asGR, obj.Name, field.ErrorList{field.Forbidden(field.NewPath("spec", "review"),
			fmt.Sprintf("user %q may not decide plan reviews: deciding needs verb %q on agentsessions/%s (bind the planmode reviewer role)",
				req.UserInfo.Username, ReviewApprovalVerb, ReviewApprovalSubresource)),
		}.ToAggregate())
	}
	return nil
}

func invalidAgentSession(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(asGK, name, errs)
}
