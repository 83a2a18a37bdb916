package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// ensureFork seeds a forked session's empty log with its parent's prefix, once. Whoever comes
// first seeds it: this phase, or a protocol v2 agent starting before the manager's first
// reconcile (pkg/agentsdk does the same Fork; the store's compare-and-swap lets one win). A
// log written without the parent is refused with a terminal condition, and the other phases
// still run so the agent's boundaries are answered.
func (sc *sessionScope) ensureFork(ctx context.Context) (ctrl.Result, error) {
	f := sc.session.Spec.Fork
	if f == nil {
		return ctrl.Result{}, nil
	}
	sid := sc.session.Spec.SessionID
	info, err := sc.r.Store.Info(ctx, sid)
	if err == nil {
		if info.ParentSession != f.SessionID {
			sc.forkRefused = &ForkRefusedError{SessionID: sid, Parent: f.SessionID, ActualParent: info.ParentSession}
			sc.emitForkRefused()
			return ctrl.Result{}, nil
		}
		sc.forkSeedLength = info.SeedLength
		return ctrl.Result{}, nil
	}
	if !errors.Is(err, sessionlog.ErrNotFound) {
		return ctrl.Result{}, storeErrorf("read session %q: %w", sid, err)
	}
	through := int64(-1)
	if f.ThroughSeq != nil {
		through = *f.ThroughSeq
	}
	tail, err := sc.r.Store.Fork(ctx, f.SessionID, sid, through)
	if err != nil {
		if sessionlog.IsConflict(err) {
			return ctrl.Result{}, &recomputeError{reason: "a concurrent reconcile seeded the fork"}
		}
		var inTurn *sessionlog.ForkBoundaryError
		if errors.As(err, &inTurn) {
			// The request itself is wrong, and spec.fork is immutable: terminal, naming the fix.
			sc.forkRefused = &ForkRefusedError{SessionID: sid, Parent: f.SessionID, Reason: fmt.Sprintf(
				"spec.fork.throughSeq %d ends inside open turn %d of session %q; "+
					"create the AgentSession again with spec.fork.throughSeq at a turn/end of the parent, or unset for its last completed turn",
				inTurn.Boundary, inTurn.Turn, f.SessionID)}
			sc.emitForkRefused()
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, storeErrorf("fork session %q from %q: %w", sid, f.SessionID, err)
	}
	sc.forkSeedLength = tail.NextSeq
	logf.FromContext(ctx).Info("seeded a forked session's log from its parent", "parent", f.SessionID, "events", tail.NextSeq, "active", tail.Active)
	return ctrl.Result{}, nil
}

// emitForkRefused warns once, when the condition first says so.
func (sc *sessionScope) emitForkRefused() {
	if c := meta.FindStatusCondition(sc.session.Status.Conditions, agentsv1alpha1.ConditionReady); c == nil || c.Reason != agentsv1alpha1.ReasonForkRefused {
		sc.emit(corev1.EventTypeWarning, EventReasonForkRefused, "Fork", sc.forkRefused.Error())
	}
}
