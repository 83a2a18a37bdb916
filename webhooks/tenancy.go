package webhooks

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Tenancy checks: one log per session (spec.sessionID), a fork of the requester's own
// namespace, an approval bound to the plan text it approves, and an agent identity bound to its
// own session. Those that need every session list them on the API server (listSessions).

// The fields the checks below list AgentSessions by, on the API server (the CRD declares them
// selectable: api/v1alpha1), across namespaces or in one.
const (
	sessionIDField           = "spec.sessionID"
	agentServiceAccountField = "spec.agent.serviceAccountName"
)

// listSessions lists the AgentSessions whose field is value (in namespace ns, or all for ""),
// from the API server: what admission needs to see is every session, whichever shard's
// manager serves it. A failed list refuses the write (retry), never admits it.
func (v *AgentSessionValidator) listSessions(ctx context.Context, ns, fieldName, value, what string) ([]agentsv1alpha1.AgentSession, error) {
	if v.Sessions == nil {
		return nil, errMissingDependency("a reader of AgentSessions")
	}
	var list agentsv1alpha1.AgentSessionList
	opts := []client.ListOption{client.MatchingFields{fieldName: value}}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := v.Sessions.List(ctx, &list, opts...); err != nil {
		logf.FromContext(ctx).Error(err, "list AgentSessions", "field", fieldName, "value", value)
		return nil, apierrors.NewServiceUnavailable("could not check " + what + "; retry: " + err.Error())
	}
	return list.Items, nil
}

// validateAgentBinding, when the operator requires bound agents, keeps one agent identity to
// one session: a session must name its agent's service account, and no other live session of
// the namespace may name the same one (else each agent could write the other's status.agent).
// A session stored before the requirement keeps its spec (ratcheting): only a spec.agent that
// is added or changed is checked, and one that is removed is refused. The manager's cache
// answers, as for spec.sessionID.
func (v *AgentSessionValidator) validateAgentBinding(ctx context.Context, oldObj, obj *agentsv1alpha1.AgentSession) (field.ErrorList, error) {
	if !v.RequireAgentBinding {
		return nil, nil
	}
	p := field.NewPath("spec", "agent")
	b := obj.Spec.Agent
	if b == nil {
		if oldObj != nil && oldObj.Spec.Agent == nil {
			return nil, nil
		}
		return field.ErrorList{field.Required(p, "this operator lets only a session's bound agent write its status.agent: "+
			"set spec.agent.serviceAccountName to the service account the agent pod runs as")}, nil
	}
	if oldObj != nil && oldObj.Spec.Agent != nil && oldObj.Spec.Agent.ServiceAccountName == b.ServiceAccountName {
		return nil, nil
	}
	others, err := v.listSessions(ctx, obj.Namespace, agentServiceAccountField, b.ServiceAccountName, "that spec.agent.serviceAccountName is not bound to another session")
	if err != nil {
		return nil, err
	}
	for i := range others {
		other := &others[i]
		if other.Name == obj.Name || other.DeletionTimestamp != nil {
			continue // the same session, or one on its way out
		}
		return field.ErrorList{field.Invalid(p.Child("serviceAccountName"), b.ServiceAccountName, fmt.Sprintf(
			"is already the agent of AgentSession %q: an agent identity writes the status of one session only; "+
				"run this session's agent as a service account of its own (kubectl create serviceaccount %s-<name>)",
			other.Name, DefaultAgentServiceAccountPrefix))}, nil
	}
	return nil, nil
}

// validateSessionIDFree refuses a new session whose spec.sessionID another AgentSession, in any
// namespace, already names: its log would be that session's. The API server answers (never the
// log store, so admission does not depend on it); the store's owner record, which the manager
// claims before touching a log, is what holds when two are created at once, and for the log of
// a session that was deleted. Another namespace's session is not named: the requester may not
// be allowed to see it.
func (v *AgentSessionValidator) validateSessionIDFree(ctx context.Context, obj *agentsv1alpha1.AgentSession) (field.ErrorList, error) {
	others, err := v.listSessions(ctx, "", sessionIDField, obj.Spec.SessionID, "that spec.sessionID is not in use")
	if err != nil {
		return nil, err
	}
	p := field.NewPath("spec", "sessionID")
	for i := range others {
		other := &others[i]
		if other.Namespace == obj.Namespace && other.Name == obj.Name {
			continue // the same session (a create retried, or re-created under its name)
		}
		where := "another AgentSession in another namespace"
		if other.Namespace == obj.Namespace {
			where = fmt.Sprintf("AgentSession %q in this namespace", other.Name)
		}
		return field.ErrorList{field.Invalid(p, obj.Spec.SessionID,
			fmt.Sprintf("is already the session log of %s: each AgentSession needs a log of its own; choose another spec.sessionID", where))}, nil
	}
	return nil, nil
}

// validateForkParent checks spec.fork against the parent's AgentSession as the API server has
// it. A parent of another namespace is refused: a fork copies its parent's events, so it would
// read another tenant's log. A throughSeq the parent's status places as the last event of its
// open turn is refused: the copy would end inside that turn. What admission cannot place (a
// parent whose AgentSession was deleted, a seq the status does not settle) is decided by the
// log store itself, in the fork's transaction (it refuses a parent log owned in another
// namespace, or by nobody), and the manager shows it as ForkRefused.
func (v *AgentSessionValidator) validateForkParent(ctx context.Context, obj *agentsv1alpha1.AgentSession) (field.ErrorList, error) {
	f := obj.Spec.Fork
	if f == nil {
		return nil, nil
	}
	parents, err := v.listSessions(ctx, "", sessionIDField, f.SessionID, "spec.fork's parent session")
	if err != nil {
		return nil, err
	}
	for i := range parents {
		parent := &parents[i]
		if parent.Namespace != obj.Namespace {
			return field.ErrorList{field.Forbidden(field.NewPath("spec", "fork", "sessionID"), fmt.Sprintf(
				"%q is the session log of an AgentSession in another namespace: a fork copies its parent's events, so it may only name a session of namespace %q",
				f.SessionID, obj.Namespace))}, nil
		}
		pm := parent.Status.PlanMode
		if f.ThroughSeq != nil && pm.TurnOpen && pm.NextSeq > 0 && *f.ThroughSeq == pm.NextSeq-1 {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "fork", "throughSeq"), *f.ThroughSeq, fmt.Sprintf(
				"is the last event of the open turn of session %q (AgentSession %q, next seq %d), so the fork would end inside that turn: "+
					"name the seq of a turn/end of the parent, or leave throughSeq unset to fork through its last completed turn",
				f.SessionID, parent.Name, pm.NextSeq))}, nil
		}
	}
	return nil, nil
}

// validateReviewDigest: a decision that names the digest of the plan it was taken on must name
// the digest of the plan under review now, so an approval never applies to a text the reviewer
// did not read. A merge patch keeps the fields it does not name, so a digest left from the
// decision on an earlier review is called out as such.
func validateReviewDigest(oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	r, posted := obj.Spec.Review, agentReview(obj)
	if r == nil || r.PlanSHA256 == "" || posted == nil || posted.ID != r.ReviewID {
		return nil
	}
	got := planmode.PlanSHA256(posted.Plan)
	if got == r.PlanSHA256 {
		return nil
	}
	p := field.NewPath("spec", "review", "planSHA256")
	if o := oldObj.Spec.Review; o != nil && o.ReviewID != r.ReviewID && o.PlanSHA256 == r.PlanSHA256 {
		return field.ErrorList{field.Invalid(p, r.PlanSHA256, fmt.Sprintf(
			"is left from the decision on review %q (a merge patch keeps the fields it does not name): "+
				"set it to the digest of the plan under review %q (%s, printed by kubectl plan review %s) or to null",
			o.ReviewID, r.ReviewID, got, obj.Name))}
	}
	return field.ErrorList{field.Invalid(p, r.PlanSHA256,
		fmt.Sprintf("is not the digest of the plan under review %q (%s): the plan is not the one read; read it again with kubectl plan review %s", r.ReviewID, got, obj.Name))}
}

// reviewDigestWarning: an Approve without a digest is bound to the review id only.
func reviewDigestWarning(oldObj, obj *agentsv1alpha1.AgentSession) admission.Warnings {
	r := obj.Spec.Review
	if r == nil || r.PlanSHA256 != "" || r.Decision != agentsv1alpha1.ReviewApprove || (oldObj != nil && !reviewChanged(oldObj, obj)) {
		return nil
	}
	return admission.Warnings{"spec.review.planSHA256 is unset: this approval is bound to the review id, not to the plan text read; kubectl plan approve sets it"}
}

// validatePlanUnchanged: the plan under a review id never changes, so the text a reviewer read
// is the text a decision for that id applies to. A changed plan is posted under a new id. The
// manager's record (status.review.planSHA256) also covers a plan withdrawn and posted again
// under the same id.
func validatePlanUnchanged(oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	n := agentReview(obj)
	if n == nil {
		return nil
	}
	p := field.NewPath("status", "agent", "review", "plan")
	msg := fmt.Sprintf("the plan under review %q cannot change once posted: post a changed plan under a new review id", n.ID)
	if o := agentReview(oldObj); o != nil && o.ID == n.ID && o.Plan != n.Plan {
		return field.ErrorList{field.Forbidden(p, msg)}
	}
	if rs := obj.Status.Review; rs != nil && rs.ID == n.ID && rs.PlanSHA256 != "" && rs.PlanSHA256 != planmode.PlanSHA256(n.Plan) {
		return field.ErrorList{field.Forbidden(p, msg)}
	}
	return nil
}

func agentReview(s *agentsv1alpha1.AgentSession) *agentsv1alpha1.PlanReviewRequest {
	if s.Status.Agent == nil {
		return nil
	}
	return s.Status.Agent.Review
}

// validateAgentWriter keeps status.agent to the session's own agent: the ServiceAccount named
// in spec.agent.serviceAccountName when the session is bound, else an agent identity of the
// session's namespace. Anyone else (a service account not named as an agent, however widely
// RBAC binds it; an agent of another session) is refused before RBAC's reach matters.
func (v *AgentSessionValidator) validateAgentWriter(req admission.Request, oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	if equality.Semantic.DeepEqual(oldObj.Status.Agent, obj.Status.Agent) {
		return nil
	}
	u := req.UserInfo
	p := field.NewPath("status", "agent")
	if b := obj.Spec.Agent; b != nil {
		if u.Username == serviceAccountUsername(obj.Namespace, b.ServiceAccountName) {
			return nil
		}
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"session %q is bound to its agent's service account %q (spec.agent.serviceAccountName): %q may not write its status.agent; run the agent as that service account, or change spec.agent",
			obj.Name, b.ServiceAccountName, u.Username))}
	}
	if agent, in := v.Identities.IsAgent(u); agent && in.Has(obj.Namespace) {
		if v.RequireAgentBinding {
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
				"session %q names no agent (spec.agent) and this operator lets only a session's bound agent write its status.agent: "+
					"bind it to the agent pod's service account with kubectl patch agentsession %s -n %s --type merge -p '{\"spec\":{\"agent\":{\"serviceAccountName\":\"<service account>\"}}}'",
				obj.Name, obj.Name, obj.Namespace))}
		}
		return nil
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
		"%q is not an agent identity of namespace %q: status.agent is written by the session's agent, a service account named %s or %s-<suffix> in namespace %q, "+
			"best bound to the session with spec.agent.serviceAccountName",
		u.Username, obj.Namespace, v.Identities.AgentServiceAccountPrefix, v.Identities.AgentServiceAccountPrefix, obj.Namespace))}
}

// agentElsewhere says why an agent identity may not write a session of namespace ns.
func agentElsewhere(user string, in AgentNamespaces, ns string, groups []string) string {
	if len(in) == 0 {
		g := DefaultAgentGroup
		if len(groups) > 0 {
			g = groups[0]
		}
		return fmt.Sprintf("%q is a member of the agent group, which makes it an agent of no namespace: add it to the group %s:%s to make it an agent of namespace %q only", user, g, ns, ns)
	}
	return fmt.Sprintf("agent identity %q is an agent of namespace %s and may not write sessions in %q", user, strings.Join(in, ", "), ns)
}

// isBoundAgent reports whether u is the service account a session is bound to: it is an agent
// of that session, so it writes no spec either.
func isBoundAgent(u string, objs ...*agentsv1alpha1.AgentSession) bool {
	for _, o := range objs {
		if o != nil && o.Spec.Agent != nil && u == serviceAccountUsername(o.Namespace, o.Spec.Agent.ServiceAccountName) {
			return true
		}
	}
	return false
}

func serviceAccountUsername(ns, name string) string {
	return serviceAccountUserPrefix + ns + ":" + name
}

// validateReviewTimeout backs the CRD's rule (a positive duration) for objects the API server
// admitted before it existed.
func validateReviewTimeout(spec *agentsv1alpha1.AgentSessionSpec) field.ErrorList {
	if t := spec.ReviewTimeout; t != nil && t.Duration <= 0 {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "reviewTimeout"), t.Duration.String(),
			"must be a positive duration such as 30m or 1h30m; remove it to let reviews wait until answered")}
	}
	return nil
}

// unboundWarning: with binding turned off (--webhook-require-agent-binding=false), an unbound
// session accepts status.agent from any agent of its namespace, which may then drop its user's
// messages or post plans for it.
func (v *AgentSessionValidator) unboundWarning(obj *agentsv1alpha1.AgentSession) admission.Warnings {
	if obj.Spec.Agent != nil || v.RequireAgentBinding {
		return nil
	}
	return admission.Warnings{fmt.Sprintf("spec.agent is unset and this operator runs with --webhook-require-agent-binding=false: "+
		"any agent identity in namespace %q may write this session's status.agent (drop its messages, post plans for it); "+
		"set spec.agent.serviceAccountName to the agent pod's service account to bind the session to it", obj.Namespace)}
}

// unbindingWarning: removing spec.agent (possible only with binding turned off) opens the
// session's status.agent to every agent of the namespace.
func (v *AgentSessionValidator) unbindingWarning(oldObj, obj *agentsv1alpha1.AgentSession) admission.Warnings {
	if oldObj.Spec.Agent == nil || obj.Spec.Agent != nil {
		return nil
	}
	return v.unboundWarning(obj)
}
