package webhooks

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Tenancy checks: one log per session (spec.sessionID), an approval bound to the plan text it
// approves, and an agent identity bound to its own session.

// SessionIDIndex is the cache index of AgentSessions by spec.sessionID, across namespaces.
const SessionIDIndex = "spec.sessionID"

// IndexSessionID returns the values an AgentSession is indexed under in SessionIDIndex.
func IndexSessionID(o client.Object) []string {
	if s, ok := o.(*agentsv1alpha1.AgentSession); ok && s.Spec.SessionID != "" {
		return []string{s.Spec.SessionID}
	}
	return nil
}

// AgentServiceAccountIndex is the cache index of AgentSessions by spec.agent.serviceAccountName
// (namespaced: list with client.InNamespace).
const AgentServiceAccountIndex = "spec.agent.serviceAccountName"

// IndexAgentServiceAccount returns the values an AgentSession is indexed under in
// AgentServiceAccountIndex.
func IndexAgentServiceAccount(o client.Object) []string {
	if s, ok := o.(*agentsv1alpha1.AgentSession); ok && s.Spec.Agent != nil {
		return []string{s.Spec.Agent.ServiceAccountName}
	}
	return nil
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
	if v.Sessions == nil {
		return nil, nil
	}
	var list agentsv1alpha1.AgentSessionList
	if err := v.Sessions.List(ctx, &list, client.InNamespace(obj.Namespace), client.MatchingFields{AgentServiceAccountIndex: b.ServiceAccountName}); err != nil {
		logf.FromContext(ctx).Error(err, "list AgentSessions by spec.agent.serviceAccountName", "serviceAccountName", b.ServiceAccountName)
		return nil, apierrors.NewServiceUnavailable("could not check that spec.agent.serviceAccountName is not bound to another session; retry: " + err.Error())
	}
	for i := range list.Items {
		other := &list.Items[i]
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
// namespace, already names: its log would be that session's. The manager's cache answers (never
// the log store, so admission does not depend on it); the store's owner record, which the
// manager claims before touching a log, is what holds when two are created at once. Another
// namespace's session is not named: the requester may not be allowed to see it.
func (v *AgentSessionValidator) validateSessionIDFree(ctx context.Context, obj *agentsv1alpha1.AgentSession) (field.ErrorList, error) {
	if v.Sessions == nil {
		return nil, nil
	}
	var list agentsv1alpha1.AgentSessionList
	if err := v.Sessions.List(ctx, &list, client.MatchingFields{SessionIDIndex: obj.Spec.SessionID}); err != nil {
		logf.FromContext(ctx).Error(err, "list AgentSessions by spec.sessionID", "sessionID", obj.Spec.SessionID)
		return nil, apierrors.NewServiceUnavailable("could not check that spec.sessionID is not in use; retry: " + err.Error())
	}
	p := field.NewPath("spec", "sessionID")
	for i := range list.Items {
		other := &list.Items[i]
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

// validateForkParent checks spec.fork against what the manager's cache knows of the parent's
// AgentSession. A parent of another namespace is refused: a fork copies its parent's events,
// so it would read another tenant's log. A throughSeq the parent's status places as the last
// event of its open turn is refused: the copy would end inside that turn. What the cache
// cannot place (a parent without an AgentSession, a seq the status does not settle) is left
// to the manager, which reads the log and refuses with ForkRefused.
func (v *AgentSessionValidator) validateForkParent(ctx context.Context, obj *agentsv1alpha1.AgentSession) (field.ErrorList, error) {
	f := obj.Spec.Fork
	if v.Sessions == nil || f == nil {
		return nil, nil
	}
	var list agentsv1alpha1.AgentSessionList
	if err := v.Sessions.List(ctx, &list, client.MatchingFields{SessionIDIndex: f.SessionID}); err != nil {
		logf.FromContext(ctx).Error(err, "list AgentSessions by spec.sessionID", "sessionID", f.SessionID)
		return nil, apierrors.NewServiceUnavailable("could not check spec.fork's parent session; retry: " + err.Error())
	}
	for i := range list.Items {
		parent := &list.Items[i]
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
	if agent, _ := v.Identities.IsAgent(u); agent {
		if v.RequireAgentBinding {
			return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
				"session %q names no agent (spec.agent) and this operator lets only a session's bound agent write its status.agent: "+
					"bind it to the agent pod's service account with kubectl patch agentsession %s -n %s --type merge -p '{\"spec\":{\"agent\":{\"serviceAccountName\":\"<service account>\"}}}'",
				obj.Name, obj.Name, obj.Namespace))}
		}
		return nil
	}
	return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
		"%q is not an agent identity: status.agent is written by the session's agent, a service account named %s or %s-<suffix> in namespace %q (or a member of the agent group), "+
			"best bound to the session with spec.agent.serviceAccountName",
		u.Username, v.Identities.AgentServiceAccountPrefix, v.Identities.AgentServiceAccountPrefix, obj.Namespace))}
}

// validateSteerID: status.agent.steerID records the last user message the agent delivered, so
// it may only change to the id of a message of this session (spec.steerQueue, or the v1
// spec.steer); any other value would mark a message delivered that never was.
func validateSteerID(oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	var was, now string
	if a := oldObj.Status.Agent; a != nil {
		was = a.SteerID
	}
	if a := obj.Status.Agent; a != nil {
		now = a.SteerID
	}
	if now == was || now == "" {
		return nil
	}
	if st := obj.Spec.Steer; st != nil && st.ID == now {
		return nil
	}
	for _, m := range obj.Spec.SteerQueue {
		if m.ID == now {
			return nil
		}
	}
	want := "no message of this session has that id (spec.steerQueue and spec.steer)"
	if st := obj.Spec.Steer; st != nil && len(obj.Spec.SteerQueue) == 0 {
		want = fmt.Sprintf("the steer message of this session is %q (spec.steer.id)", st.ID)
	}
	return field.ErrorList{field.Invalid(field.NewPath("status", "agent", "steerID"), now,
		want+": the agent records only the id of the message it delivered")}
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

// unboundWarning: an unbound session accepts status.agent from any agent of its namespace.
func (v *AgentSessionValidator) unboundWarning(obj *agentsv1alpha1.AgentSession) admission.Warnings {
	if obj.Spec.Agent != nil || v.RequireAgentBinding {
		return nil
	}
	return admission.Warnings{fmt.Sprintf("spec.agent is unset: any agent identity in namespace %q may write this session's status.agent; "+
		"set spec.agent.serviceAccountName to the agent pod's service account to bind the session to it", obj.Namespace)}
}
