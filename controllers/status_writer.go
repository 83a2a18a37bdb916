package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// staleRequeue is how soon a reconcile whose guarded write was refused runs again, from the
// newer object.
const staleRequeue = 5 * time.Millisecond

// newestKnown returns the session to compute from, and whether it is known to be the API
// server's newest as far as the manager's decisions go. It is when its manager-owned status is
// the one this process last wrote or checked: nothing else writes those fields (the webhook
// keeps them the manager's), and a user's spec change the cache has not shown yet is taken on
// next, as if it came just after. When this process holds a digest the cached session does
// not show, the cache lags that write (or another writer changed the manager's fields): one
// live read then replaces the cached object, so nothing is decided, and no write sent, on a
// status the API server would refuse. With no digest held (a first reconcile after a start),
// an append reads live first (ensureNewestSession).
func (r *AgentSessionReconciler) newestKnown(ctx context.Context, s *agentsv1alpha1.AgentSession) (*agentsv1alpha1.AgentSession, bool, error) {
	key := client.ObjectKeyFromObject(s)
	held, ok := r.sessions.heldDigest(key)
	switch {
	case !ok || r.APIReader == nil:
		return s, false, nil
	case held == digestStatus(&s.Status):
		return s, true, nil
	}
	var live agentsv1alpha1.AgentSession
	if err := r.APIReader.Get(ctx, key, &live); err != nil {
		return nil, false, fmt.Errorf("read AgentSession %s past the cache: %w", key, err)
	}
	return &live, true, nil
}

// writeStatus writes the manager's part of the status (observedGeneration, planMode, review,
// conditions) once, or, when no write is due, records a status it checked against the log.
//
// When the session's manager-owned status is the one this process last wrote (the common case:
// the cache has the write, and nothing else writes those fields: the webhook keeps them the
// manager's, leader election keeps one manager), the write is a merge patch of the changed
// fields alone, with no precondition: it cannot undo a write it has not seen, and it never
// conflicts with the agent's status.agent or a user's spec. Otherwise (the first write after
// a start, or another writer's status) it is guarded (patchGuarded).
func (r *AgentSessionReconciler) writeStatus(ctx context.Context, sc *sessionScope) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(sc.session)
	if !sc.changed {
		if sc.logChecked() {
			r.sessions.verified(key, digestStatus(&sc.session.Status))
		}
		return ctrl.Result{}, nil
	}
	obj := sc.session.DeepCopy()
	agent := obj.Status.Agent
	obj.Status = *sc.status.DeepCopy()
	obj.Status.Agent = agent
	var err error
	if r.sessions.holds(key, digestStatus(&sc.session.Status)) {
		err = r.Status().Patch(ctx, obj, client.MergeFrom(sc.session), client.FieldOwner(FieldManager))
	} else {
		err = r.patchGuarded(ctx, sc.session, obj)
	}
	if err != nil {
		if refusedAsStale(err) {
			r.sessions.refused(key)
			logf.FromContext(ctx).V(1).Info("the status changed since it was read; recomputing", "reason", err)
			return ctrl.Result{RequeueAfter: staleRequeue}, nil
		}
		return ctrl.Result{}, fmt.Errorf("patch status of AgentSession %s: %w", key, err)
	}
	// What the server stored, in its wire form: the cache shows exactly this once it has
	// caught up with the write.
	r.sessions.wrote(key, digestStatus(&obj.Status))
	pm := sc.status.PlanMode
	logf.FromContext(ctx).V(1).Info("status written", "active", pm.Active, "pending", pm.Pending, "nextSeq", pm.NextSeq)
	r.observe(sc.session, sc.session.Status, sc.status)
	return ctrl.Result{}, nil
}

// patchGuarded writes obj's manager-owned status as a JSON patch that holds only if those
// fields still hold what orig holds ("test" operations): a status computed from an object
// older than the stored one is refused instead of undoing a write, while a concurrent write of
// status.agent or spec is no conflict. The first write of a session, and the one after a
// refused write, are guarded by the resourceVersion instead.
func (r *AgentSessionReconciler) patchGuarded(ctx context.Context, orig, obj *agentsv1alpha1.AgentSession) error {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	const test, add, review = "test", "add", "/status/review"
	old, status := orig.Status, obj.Status
	var ops []op
	if r.sessions.guardsByVersion(client.ObjectKeyFromObject(orig)) || equality.Semantic.DeepEqual(old, agentsv1alpha1.AgentSessionStatus{}) {
		ops = append(ops, op{test, "/metadata/resourceVersion", orig.ResourceVersion})
		if equality.Semantic.DeepEqual(old, agentsv1alpha1.AgentSessionStatus{}) {
			ops = append(ops, op{add, "/status", map[string]any{}})
		}
	} else {
		ops = append(ops,
			op{test, "/status/observedGeneration", old.ObservedGeneration},
			op{test, "/status/planMode", old.PlanMode},
			op{test, review, old.Review}, // null also matches an absent field
			op{test, "/status/conditions", old.Conditions})
	}
	ops = append(ops,
		op{add, "/status/observedGeneration", status.ObservedGeneration},
		op{add, "/status/planMode", status.PlanMode},
		op{add, "/status/conditions", status.Conditions})
	if status.Review != nil {
		ops = append(ops, op{add, review, status.Review})
	} else if old.Review != nil {
		ops = append(ops, op{Op: "remove", Path: review})
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return fmt.Errorf("encode the status patch: %w", err)
	}
	return r.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body), client.FieldOwner(FieldManager))
}

// refusedAsStale reports a guarded write the API server refused because the object changed
// since it was read: a resourceVersion conflict, or a failed "test" operation. The API server
// reports the latter as an unprocessable patch with no details, where an object that is
// genuinely invalid names its kind and the fields at fault (and is not retried at once).
func refusedAsStale(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Kind == "" && len(d.Causes) == 0
}
