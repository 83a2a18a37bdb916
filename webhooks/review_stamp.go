package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/reviewpolicy"
)

// AgentSessionStampPath is where the AgentSession identity stamper is served.
const AgentSessionStampPath = "/mutate-agents-harness-dev-v1alpha1-agentsession"

// AgentSessionStamper is the mutating admission webhook that records who took each decision and
// each selection, from the authenticated admission request, the way cert-manager stamps a
// CertificateRequest's requester: a new decision (spec.review, an entry appended to
// spec.reviewVotes) gets decidedBy and decidedAt, a changed spec.planMode.active gets
// selectedBy and selectedAt. A stamp the client left absent, or carried over unchanged from the
// stored object (kubectl edit, a read-modify-write), is overwritten; a stamp the client changed
// to name someone else is left as sent, for the validator to refuse (review_votes.go), so a
// forgery is an error the client sees, not silently repaired.
//
// It also keeps spec.reviewVotes bounded (a vote appended drops the votes naming any other
// review: they can no longer apply) and, when a write completes an approval under the
// namespace's ReviewPolicy, sets spec.planMode.active to false in the same write (approving
// leaves plan mode; docs/review.md).
type AgentSessionStamper struct {
	// Policies reads ReviewPolicies (the API reader, as Sessions). Nil: every namespace has none.
	Policies client.Reader
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ admission.Handler = &AgentSessionStamper{}

// Handle implements admission.Handler. Mutating webhooks run before the schema is checked, so
// an object this handler cannot decode is let through unchanged: the schema and the validator
// refuse it with their own messages. The response patches only the fields it stamps, never a
// re-encoding of the whole object (that would rewrite values such as durations).
func (m *AgentSessionStamper) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.SubResource != "" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("")
	}
	obj, old := &agentsv1alpha1.AgentSession{}, &agentsv1alpha1.AgentSession{}
	if err := json.Unmarshal(req.Object.Raw, obj); err != nil {
		return admission.Allowed("")
	}
	if len(req.OldObject.Raw) > 0 {
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Allowed("")
		}
	}
	sent := obj.DeepCopy()
	if err := m.stamp(ctx, req, old, obj); err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: ptr.To(st.Status())}}
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	var ops []jsonpatch.JsonPatchOperation
	set := func(path string, was, now any, empty bool) {
		switch {
		case equality.Semantic.DeepEqual(was, now):
		case empty:
			ops = append(ops, jsonpatch.NewOperation("remove", path, nil))
		default:
			ops = append(ops, jsonpatch.NewOperation("add", path, now))
		}
	}
	set("/spec/planMode", sent.Spec.PlanMode, obj.Spec.PlanMode, false)
	set("/spec/review", sent.Spec.Review, obj.Spec.Review, obj.Spec.Review == nil)
	set("/spec/reviewVotes", sent.Spec.ReviewVotes, obj.Spec.ReviewVotes, len(obj.Spec.ReviewVotes) == 0)
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("", ops...)
}

// stamp records the identity of req on obj's new decisions and selection (old is empty at
// create).
func (m *AgentSessionStamper) stamp(ctx context.Context, req admission.Request, old, obj *agentsv1alpha1.AgentSession) error {
	now := metav1.NewTime(m.now())
	actor := actorOf(req.UserInfo)
	stampSelection(old, obj, actor, now)
	if stampDecisions(old, obj, actor, now) {
		pruneVotes(obj)
		return m.exitOnApproval(ctx, obj, actor, now)
	}
	return nil
}

func (m *AgentSessionStamper) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// actorOf is the identity of an admission request.
func actorOf(u authenticationv1.UserInfo) agentsv1alpha1.Actor {
	a := agentsv1alpha1.Actor{Username: u.Username, UID: u.UID}
	if len(u.Groups) > 0 {
		a.Groups = append([]string(nil), u.Groups...)
	}
	return a
}

// stale reports a stamp the client did not set itself: absent, or as stored.
func stale(sent, stored *agentsv1alpha1.Actor) bool {
	return sent == nil || stored != nil && equality.Semantic.DeepEqual(sent, stored)
}

func stampSelection(old, obj *agentsv1alpha1.AgentSession, actor agentsv1alpha1.Actor, now metav1.Time) {
	o, n := &old.Spec.PlanMode, &obj.Spec.PlanMode
	if sameActive(o.Active, n.Active) {
		if n.SelectedBy == nil && n.SelectedAt == nil { // a whole-object write that left the stamp out
			n.SelectedBy, n.SelectedAt = o.SelectedBy.DeepCopy(), o.SelectedAt.DeepCopy()
		}
		return
	}
	if stale(n.SelectedBy, o.SelectedBy) {
		n.SelectedBy = actor.DeepCopy()
	}
	n.SelectedAt = &now
}

// stampDecisions stamps each new decision and reports whether there was one.
func stampDecisions(old, obj *agentsv1alpha1.AgentSession, actor agentsv1alpha1.Actor, now metav1.Time) bool {
	added := false
	if d := obj.Spec.Review; d != nil && old.Spec.Review != nil {
		restoreStamps(d, old.Spec.Review, actor)
	}
	// By position: two reviewers' votes may be alike but for their stamps, and a vote appended
	// after the stored ones is new.
	for i := range obj.Spec.ReviewVotes {
		if i < len(old.Spec.ReviewVotes) {
			restoreStamps(&obj.Spec.ReviewVotes[i], &old.Spec.ReviewVotes[i], actor)
		}
	}
	if d := obj.Spec.Review; d != nil && !equality.Semantic.DeepEqual(old.Spec.Review, d) {
		var stored *agentsv1alpha1.Actor
		if old.Spec.Review != nil {
			stored = old.Spec.Review.DecidedBy
		}
		stampDecision(d, stored, actor, now)
		added = true
	}
	for _, i := range addedVotes(old.Spec.ReviewVotes, obj.Spec.ReviewVotes) {
		stampDecision(&obj.Spec.ReviewVotes[i], nil, actor, now)
		added = true
	}
	return added
}

func stampDecision(d *agentsv1alpha1.ReviewDecision, stored *agentsv1alpha1.Actor, actor agentsv1alpha1.Actor, now metav1.Time) {
	if stale(d.DecidedBy, stored) {
		d.DecidedBy = actor.DeepCopy()
	}
	d.DecidedAt = &now
}

// restoreStamps gives a decision sent without stamps the stamps of the stored decision it
// repeats, when the writer is the one who took it (their whole-object write, such as kubectl
// replace, of a manifest without them). Anyone else sending the same decision takes a decision
// of their own, stamped as theirs.
func restoreStamps(d, stored *agentsv1alpha1.ReviewDecision, writer agentsv1alpha1.Actor) {
	if d.DecidedBy != nil || d.DecidedAt != nil || stored.DecidedBy == nil || stored.DecidedBy.Username != writer.Username {
		return
	}
	s := stored.DeepCopy()
	s.DecidedBy, s.DecidedAt = nil, nil
	if equality.Semantic.DeepEqual(s, d) {
		d.DecidedBy, d.DecidedAt = stored.DecidedBy.DeepCopy(), stored.DecidedAt.DeepCopy()
	}
}

// addedVotes returns the indexes of the votes in now that were not in was, counting repeats: a
// vote sent twice, identical to the first to the second, is a new one.
func addedVotes(was, now []agentsv1alpha1.ReviewDecision) []int {
	left := make([]bool, len(was))
	var added []int
	for i := range now {
		found := false
		for j := range was {
			if !left[j] && equality.Semantic.DeepEqual(&was[j], &now[i]) {
				left[j], found = true, true
				break
			}
		}
		if !found {
			added = append(added, i)
		}
	}
	return added
}

// pruneVotes drops the votes naming a review other than the plan under review: the manager
// applies a vote only to the review it names, and the decided ones are in status.review and
// status.reviewHistory.
func pruneVotes(obj *agentsv1alpha1.AgentSession) {
	req := agentReview(obj)
	kept := obj.Spec.ReviewVotes[:0:0]
	for _, d := range obj.Spec.ReviewVotes {
		if req != nil && d.ReviewID == req.ID {
			kept = append(kept, d)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	obj.Spec.ReviewVotes = kept
}

// exitOnApproval sets spec.planMode.active to false when the object's votes approve the plan
// under review under the namespace's policy: the approval that completes a review leaves plan
// mode in the same write, so the user's selection in spec says so too (docs/review.md).
// Earlier approvals of a policy that needs several leave the selection alone.
func (m *AgentSessionStamper) exitOnApproval(ctx context.Context, obj *agentsv1alpha1.AgentSession, actor agentsv1alpha1.Actor, now metav1.Time) error {
	pm := &obj.Spec.PlanMode
	if pm.Active == nil || !*pm.Active {
		return nil
	}
	v, err := verdictOf(ctx, m.Policies, obj)
	if err != nil || v == nil || !v.Approved() {
		return err
	}
	f := false
	pm.Active, pm.SelectedBy, pm.SelectedAt = &f, actor.DeepCopy(), &now
	return nil
}

// verdictOf judges the votes on obj's plan under review under its namespace's policy; nil when
// no plan is under review or the manager has already closed its review.
func verdictOf(ctx context.Context, policies client.Reader, obj *agentsv1alpha1.AgentSession) (*reviewpolicy.Verdict, error) {
	req := agentReview(obj)
	if req == nil {
		return nil, nil
	}
	if rs := obj.Status.Review; rs != nil && rs.ID == req.ID && rs.Phase != agentsv1alpha1.ReviewPending && rs.Phase != "" {
		return nil, nil
	}
	rules, err := policyRules(ctx, policies, obj.Namespace)
	if err != nil {
		return nil, err
	}
	v := reviewpolicy.Judge(obj, req, postedDigest(obj, req), reviewpolicy.RequesterOf(obj, req), rules)
	return &v, nil
}

// policyRules reads the namespace's ReviewPolicy. A read that fails is an error (fail closed:
// the write is refused and can be retried), never "no policy".
func policyRules(ctx context.Context, policies client.Reader, ns string) (reviewpolicy.Rules, error) {
	if policies == nil {
		return reviewpolicy.RulesOf(nil), nil
	}
	var p agentsv1alpha1.ReviewPolicy
	err := policies.Get(ctx, types.NamespacedName{Namespace: ns, Name: agentsv1alpha1.DefaultReviewPolicyName}, &p)
	switch {
	case apierrors.IsNotFound(err):
		return reviewpolicy.RulesOf(nil), nil
	case err != nil:
		return reviewpolicy.Rules{}, apierrors.NewServiceUnavailable(fmt.Sprintf("could not read the ReviewPolicy %s/%s; retry: %v", ns, agentsv1alpha1.DefaultReviewPolicyName, err))
	}
	return reviewpolicy.RulesOf(&p), nil
}

func sameActive(a, b *bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
