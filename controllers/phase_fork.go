package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// ensureFork seeds a forked session's empty log with its parent's prefix, once. Whoever comes
// first seeds it: this phase, or a protocol v2 agent starting before the manager's first
// reconcile (pkg/agentsdk does the same Fork; the store's compare-and-swap lets one win). A
// log written without the parent is refused (forkRefused), and the other phases still run so
// the agent's boundaries are answered.
func (sc *sessionScope) ensureFork(ctx context.Context) (ctrl.Result, error) {
	f := sc.session.Spec.Fork
	if f == nil {
		return ctrl.Result{}, nil
	}
	sid := sc.session.Spec.SessionID
	info, err := sc.r.Store.Info(ctx, sid)
	if err == nil {
		if info.ParentSession != f.SessionID {
			return ctrl.Result{}, forkRefused(&forkMismatchError{SessionID: sid, Parent: f.SessionID, ActualParent: info.ParentSession})
		}
		sc.forkSeedLength = info.SeedLength
		return ctrl.Result{}, nil
	}
	if !errors.Is(err, sessionlog.ErrNotFound) {
		return ctrl.Result{}, storeFailure("Fork", "read session %q: %w", sid, err)
	}
	through := int64(-1)
	if f.ThroughSeq != nil {
		through = *f.ThroughSeq
	}
	owner := sessionlog.Owner{Namespace: sc.session.Namespace, Name: sc.session.Name, UID: string(sc.session.UID)}
	tail, err := sc.r.Store.Fork(ctx, f.SessionID, sid, through, owner)
	if err != nil {
		if sessionlog.IsConflict(err) {
			return ctrl.Result{}, &recomputeError{reason: "a concurrent reconcile seeded the fork"}
		}
		var refused *sessionlog.OwnershipError
		if errors.As(err, &refused) {
			// The store refused who asks (docs/admission.md, "Who may fork whom"). A parent
			// nobody owns yet may be claimed soon (its AgentSession was created at the same
			// time): that one is tried again; the others are terminal.
			var res ctrl.Result
			if refused.Refusal == sessionlog.RefusedParentUnowned {
				res.RequeueAfter = forkParentRetry
			}
			return res, forkRefused(fmt.Errorf("spec.fork: session %q cannot be seeded from %q: %w", sid, f.SessionID, refused))
		}
		var inTurn *sessionlog.ForkBoundaryError
		if errors.As(err, &inTurn) {
			// The request itself is wrong, and spec.fork is immutable: naming the fix.
			return ctrl.Result{}, forkRefused(fmt.Errorf("spec.fork: session %q cannot be seeded from %q: "+
				"spec.fork.throughSeq %d ends inside open turn %d of session %q; "+
				"create the AgentSession again with spec.fork.throughSeq at a turn/end of the parent, or unset for its last completed turn",
				sid, f.SessionID, inTurn.Boundary, inTurn.Turn, f.SessionID))
		}
		return ctrl.Result{}, storeFailure("Fork", "fork session %q from %q: %w", sid, f.SessionID, err)
	}
	sc.forkSeedLength = tail.NextSeq
	logf.FromContext(ctx).Info("seeded a forked session's log from its parent", "parent", f.SessionID, "events", tail.NextSeq, "active", tail.Active)
	return ctrl.Result{}, nil
}

// forkParentRetry is how soon a fork whose parent log has no owner yet is tried again.
const forkParentRetry = 5 * time.Second

// forkMismatchError is a session's log that exists and was not seeded from the parent spec.fork
// names: an agent without fork support appended first, or the session ID was reused.
type forkMismatchError struct{ SessionID, Parent, ActualParent string }

func (e *forkMismatchError) Error() string {
	had := "no parent"
	if e.ActualParent != "" {
		had = fmt.Sprintf("parent %q", e.ActualParent)
	}
	return fmt.Sprintf("spec.fork: session %q already exists in the log store with %s, so it cannot be seeded from %q "+
		"(an agent appended before the fork was seeded, or the session ID was reused); "+
		"create the AgentSession again with a new spec.sessionID, and run agents built with a protocol v2 agent SDK, which seed the fork themselves",
		e.SessionID, had, e.Parent)
}
