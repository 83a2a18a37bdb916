package controllers

import (
	"context"
	"crypto/sha256"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// One log per session. spec.sessionID is the log's key in a store shared by every namespace,
// so a second AgentSession naming the same ID, in any namespace, would read another session's
// log and append plan/mode events to it. The store records which AgentSession a log belongs
// to (sessionlog.Store.ClaimOwner); this phase claims it before any other phase touches the
// log, and a session whose log belongs to another stops with SessionIDInUse. The admission
// webhook refuses most such sessions at create already (webhooks: the cached sessionID
// index); this is what holds when two are created at once, or a session predates the check.

// claimLog makes sure the log of spec.sessionID belongs to this AgentSession. A claim this
// process already made for the same UID is not repeated, so an up-to-date session costs no extra
// store call.
func (sc *sessionScope) claimLog(ctx context.Context) (ctrl.Result, error) {
	s := sc.session
	key, sid := client.ObjectKeyFromObject(s), s.Spec.SessionID
	if sc.r.memory.claimed(key, s.UID, sid) {
		return ctrl.Result{}, nil
	}
	// The store's read at start (warm_start.go), made by the first reconcile that gets here,
	// holds the claim of an owned log and claims the new ones.
	if sc.r.warm(ctx).owns(s) || sc.r.memory.claimed(key, s.UID, sid) {
		sc.r.memory.recordClaim(key, s.UID, sid)
		return ctrl.Result{}, nil
	}
	me := sessionlog.Owner{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}
	holder, err := sc.r.Store.ClaimOwner(ctx, sid, me)
	if err != nil {
		return ctrl.Result{}, storeFailure("ClaimLog", "record AgentSession %s as the owner of session %q's log: %w", key, sid, err)
	}
	if holder.SameSession(me) {
		sc.r.memory.recordClaim(key, s.UID, sid)
		return ctrl.Result{}, nil
	}
	logf.FromContext(ctx).Info("refusing a session whose log belongs to another AgentSession",
		"sessionID", sid, "owner", holder.String(), "ownerUID", holder.UID)
	return ctrl.Result{}, sessionIDInUse(sid)
}

// claimDigest is a truncated SHA-256 of a session's UID and spec.sessionID, what this process
// remembers of a claim it recorded (sessionMemory), so that an up-to-date session costs no
// ClaimOwner call. A digest, not the two strings: the cache replaces the session's object on
// every write, and copies kept here would outlive it, one pair per session.
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
