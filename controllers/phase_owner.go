package controllers

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// One log per session. spec.sessionID is the log's key in a store shared by every namespace,
// so a second AgentSession naming the same ID, in any namespace, would read another session's
// log and append plan/mode events to it. The store records which AgentSession a log belongs
// to (sessionlog.Store.ClaimOwner); this phase claims it before any other phase touches the
// log, and a session whose log belongs to another stops with SessionIDInUse. The admission
// webhook refuses most such sessions at create already (webhooks: the cached sessionID
// index); this is what holds when two are created at once, or a session predates the check.

// SessionIDInUseError is a session whose spec.sessionID names a log another AgentSession owns.
// It is terminal: spec.sessionID is immutable, so no retry can cure it. The message does not
// name the owner, which may be in a namespace the reader cannot see; the manager's log does.
type SessionIDInUseError struct{ SessionID string }

func (e *SessionIDInUseError) Error() string {
	return fmt.Sprintf("spec.sessionID %q is the log of another AgentSession: this session never reads or writes it. "+
		"spec.sessionID is immutable: delete this AgentSession and create it with a session ID of its own", e.SessionID)
}

// claimLog makes sure the log of spec.sessionID belongs to this AgentSession. A claim this
// process already made for the same UID is not repeated, so a settled session costs no extra
// store call.
func (sc *sessionScope) claimLog(ctx context.Context) (ctrl.Result, error) {
	s := sc.session
	key, sid := client.ObjectKeyFromObject(s), s.Spec.SessionID
	if sc.r.claims.has(key, s.UID, sid) {
		return ctrl.Result{}, nil
	}
	me := sessionlog.Owner{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}
	holder, err := sc.r.Store.ClaimOwner(ctx, sid, me)
	if err != nil {
		return ctrl.Result{}, storeErrorf("record AgentSession %s as the owner of session %q's log: %w", key, sid, err)
	}
	if holder.SameSession(me) {
		sc.r.claims.record(key, s.UID, sid)
		return ctrl.Result{}, nil
	}
	logf.FromContext(ctx).Info("refusing a session whose log belongs to another AgentSession",
		"sessionID", sid, "owner", holder.String(), "ownerUID", holder.UID)
	return sc.stopWith(agentsv1alpha1.ReasonSessionIDInUse, EventReasonSessionIDInUse, "ClaimLog", &SessionIDInUseError{SessionID: sid})
}

// logClaims remembers, per session, the (UID, sessionID) whose log this process recorded as
// the session's in the store, so that a settled session costs no ClaimOwner call. A digest,
// not the two strings: the cache replaces the session's object on every write, and copies kept
// here would outlive it, one pair per session. The zero value is ready to use.
type logClaims struct {
	mu sync.Mutex
	m  map[types.NamespacedName]claimDigest
}

// claimDigest is a truncated SHA-256 of a session's UID and spec.sessionID.
type claimDigest [16]byte

func digestClaim(uid types.UID, sid string) claimDigest {
	h := sha256.New()
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write([]byte(sid))
	var d claimDigest
	copy(d[:], h.Sum(nil))
	return d
}

// has reports whether this process recorded the log of sid as the session with uid's.
func (c *logClaims) has(key types.NamespacedName, uid types.UID, sid string) bool {
	d := digestClaim(uid, sid)
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[key]
	return ok && got == d
}

func (c *logClaims) record(key types.NamespacedName, uid types.UID, sid string) {
	d := digestClaim(uid, sid)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]claimDigest{}
	}
	c.m[key] = d
}

func (c *logClaims) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// stopWith ends the phases on a failure that needs a person (a condition with reason): a
// Warning Event when the session does not show that reason yet, and a Failed answer, with
// that reason, to a boundary its agent waits at, so the agent does not wait in vain.
func (sc *sessionScope) stopWith(reason, eventReason, action string, failure error) (ctrl.Result, error) {
	if c := meta.FindStatusCondition(sc.session.Status.Conditions, agentsv1alpha1.ConditionReady); c == nil || c.Reason != reason {
		sc.emit(corev1.EventTypeWarning, eventReason, action, failure.Error())
	}
	if b := unanswered(sc.session); b != nil {
		ack := sc.ack(b, agentsv1alpha1.BoundaryFailed, sc.stored.Active, sc.stored.NextSeq)
		ack.Reason, ack.Message = reason, failure.Error()
		sc.planMode.LastBoundary = ack
	}
	return ctrl.Result{}, failure
}

// terminal marks a failure no retry can cure, so the workqueue does not retry it; a change to
// the session (a new generation, a status write) still reconciles it.
func terminal(failure error) error {
	var inUse *SessionIDInUseError
	if errors.As(failure, &inUse) {
		return reconcile.TerminalError(failure)
	}
	return failure
}
