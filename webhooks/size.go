package webhooks

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// The size budget of one AgentSession. The CRD's per-field limits add up to more than etcd
// stores in one object (about 1.5 MiB by default, managedFields included), so without a budget a
// large write fails late with a bare "request is too large" and no field to shrink.
const (
	// MaxSessionBytes is the largest AgentSession (as JSON, managedFields included) the
	// webhook admits: a third below etcd's default request limit, for the envelope and the
	// manager's status writes, which are not budgeted.
	MaxSessionBytes = 1 << 20
	// MaxPlanBytes is the largest plan the agent posts (status.agent.review.plan's MaxLength).
	MaxPlanBytes = 256 << 10
	// MaxUserSessionBytes is the budget of a user's write: it leaves room for the largest plan
	// and the status, so a plan post never fails for a queue the user filled.
	MaxUserSessionBytes = MaxSessionBytes - MaxPlanBytes - 32<<10
)

// validateSize refuses a write that would make the session larger than its budget, naming the
// field that takes the most: a user's write (create or spec) against MaxUserSessionBytes, the
// agent's plan post against MaxSessionBytes. A write that does not grow the session passes,
// so one stored over the budget can still be shrunk or finalized; the manager's and the
// agent's other status writes are small and not budgeted.
func (v *AgentSessionValidator) validateSize(req admission.Request, oldObj, obj *agentsv1alpha1.AgentSession) error {
	budget := MaxUserSessionBytes
	if req.SubResource == "status" {
		if v.Identities.IsManager(req.UserInfo) || sameReview(agentReview(oldObj), agentReview(obj)) {
			return nil
		}
		budget = MaxSessionBytes
	}
	size := len(req.Object.Raw)
	if size <= budget || (oldObj != nil && size <= len(req.OldObject.Raw)) {
		return nil
	}
	p, n, fix := largestField(obj)
	return apierrors.NewInvalid(asGK, obj.Name, field.ErrorList{field.Invalid(p, fmt.Sprintf("%d bytes", n), fmt.Sprintf(
		"the AgentSession would be %d bytes, over its budget of %d bytes (etcd refuses objects much larger); this field holds the most: %s",
		size, budget, fix))})
}

// sameReview: the agent's write does not post or change a plan.
func sameReview(a, b *agentsv1alpha1.PlanReviewRequest) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// largestField names the field of obj that takes the most bytes, its size, and how to shrink it.
func largestField(obj *agentsv1alpha1.AgentSession) (*field.Path, int, string) {
	sizeOf := func(v any) int {
		b, _ := json.Marshal(v)
		return len(b)
	}
	type candidate struct {
		path *field.Path
		n    int
		fix  string
	}
	cs := []candidate{
		{field.NewPath("spec", "steerQueue"), sizeOf(obj.Spec.SteerQueue), fmt.Sprintf(
			"%d queued messages the agent has not taken yet; wait until it takes some (kubectl plan status %s) or send shorter ones", len(obj.Spec.SteerQueue), obj.Name)},
		{field.NewPath("metadata", "annotations"), sizeOf(obj.Annotations), "remove large annotations"},
		{field.NewPath("metadata", "labels"), sizeOf(obj.Labels), "remove large labels"},
		{field.NewPath("metadata", "managedFields"), sizeOf(obj.ManagedFields), "fewer field managers write this session"},
	}
	if r := obj.Spec.Review; r != nil {
		cs = append(cs, candidate{field.NewPath("spec", "review", "feedback"), len(r.Feedback), "send shorter feedback"})
	}
	if r := agentReview(obj); r != nil {
		cs = append(cs, candidate{field.NewPath("status", "agent", "review", "plan"), len(r.Plan), "post a shorter plan"})
	}
	best := cs[0]
	for _, c := range cs[1:] {
		if c.n > best.n {
			best = c
		}
	}
	return best.path, best.n, best.fix
}
