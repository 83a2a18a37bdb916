// Package floor is the benchmark's floor controller: it plays the manager's part of the
// step-boundary protocol with no log work. It marks a selection pending during a turn and
// answers a reported boundary by copying the report into status.planMode.lastBoundary with the
// current log tail (one O(1) Tail read, never an append). Whatever the real reconciler costs on
// top of this is the price of plan mode itself. Tests also use it as an "echo" acknowledger.
package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// FieldManager is the floor's field manager.
const FieldManager = "planmode-floor"

// Reconciler is the floor controller.
type Reconciler struct {
	Client client.Client
	Store  sessionlog.Store
	// Selector restricts the sessions it answers (nil: all).
	Selector labels.Selector
	// Name of the controller (unique per manager); default "floor".
	Name string
	// Options of the controller (MaxConcurrentReconciles: give it the manager's, for a fair
	// comparison).
	Options controller.Options
	// ManagerShape makes the floor store what the manager stores besides its answer: the Ready
	// condition, observedGeneration, a config in force with its digest, the transition time,
	// the told state and the owed notice, still with no log work, no Events and no config
	// reads. Its object is then as large as the manager's, so a comparison against it shows
	// what plan mode's work costs apart from the size of the object every write handles.
	ManagerShape bool
	// ObserveGeneration makes the floor write status.observedGeneration for every generation
	// of the spec it has seen, a new session's first one included: the least any controller
	// does for an API whose status promises observedGeneration, and so the floor's own
	// "taken on" (test/scale's start-up figures). A generation that comes with a new selection
	// is observed in the same write, so the storms' write counts are those without it.
	ObserveGeneration bool
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	name := r.Name
	if name == "" {
		name = "floor"
	}
	b := builder.ControllerManagedBy(mgr).Named(name).For(&v1alpha1.AgentSession{}).WithOptions(r.Options)
	if r.Selector != nil {
		sel := r.Selector
		b = b.WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return sel.Matches(labels.Set(o.GetLabels()))
		}))
	}
	return b.Complete(r)
}

// Reconcile answers an unanswered boundary, or takes on a changed selection.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1alpha1.AgentSession
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pm := s.Status.PlanMode
	x := s.Spec.PlanMode.Active
	newSelection := x != nil && (pm.Selection == nil || *pm.Selection != *x)
	var b *v1alpha1.StepBoundary
	if s.Status.Agent != nil {
		b = s.Status.Agent.Boundary
	}
	unanswered := b != nil && (pm.LastBoundary == nil || pm.LastBoundary.Turn != b.Turn ||
		pm.LastBoundary.Step != b.Step || pm.LastBoundary.Seq != b.Seq)
	unobserved := r.ObserveGeneration && s.Status.ObservedGeneration != s.Generation
	if !newSelection && !unanswered && !unobserved {
		return ctrl.Result{}, nil
	}
	t, err := r.Store.Tail(ctx, s.Spec.SessionID)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("floor: read tail of %q: %w", s.Spec.SessionID, err)
	}
	st := map[string]any{"nextSeq": t.NextSeq, "turnOpen": t.TurnOpen, "active": t.Active}
	if newSelection {
		st["selection"] = *x
		st["pending"] = t.TurnOpen
	}
	if unanswered {
		st["pending"] = false
		st["lastBoundary"] = v1alpha1.BoundaryAck{
			Turn: b.Turn, Step: b.Step, Seq: b.Seq, Result: v1alpha1.BoundaryAdmitted,
			Active: t.Active, NextSeq: t.NextSeq, Time: metav1.NewTime(time.Now()),
		}
	}
	status := map[string]any{"planMode": st}
	if r.ObserveGeneration {
		status["observedGeneration"] = s.Generation
	}
	if r.ManagerShape {
		r.padToManagerShape(&s, t, status, unanswered)
	}
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Client.Status().Patch(ctx, &s, client.RawPatch(types.MergePatchType, body), client.FieldOwner(FieldManager)); err != nil {
		return ctrl.Result{}, fmt.Errorf("floor: patch status of %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// padToManagerShape adds to status what the manager's status holds besides the floor's fields
// (see ManagerShape), in the same shapes and sizes.
func (r *Reconciler) padToManagerShape(s *v1alpha1.AgentSession, t harness.Tail, status map[string]any, unanswered bool) {
	st := status["planMode"].(map[string]any)
	now := metav1.NewTime(time.Now())
	sel := t.Active
	if x := s.Spec.PlanMode.Active; x != nil {
		sel = *x
	}
	notice := harness.NoticeText(sel)
	st["config"] = v1alpha1.ConfigInForce{Name: v1alpha1.DefaultPlanModeConfigName, Generation: 1, SectionSHA256: v1alpha1.SectionDigest("floor")}
	st["lastTransitionTime"] = now
	st["toldActive"] = t.Active
	st["notice"] = v1alpha1.OwedNotice{Seq: t.NextSeq, Text: notice}
	if unanswered {
		ack := st["lastBoundary"].(v1alpha1.BoundaryAck)
		ack.Notice = notice
		st["lastBoundary"] = ack
	}
	status["observedGeneration"] = s.Generation
	status["conditions"] = []metav1.Condition{{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "InSync", ObservedGeneration: s.Generation, LastTransitionTime: now,
	}}
}
