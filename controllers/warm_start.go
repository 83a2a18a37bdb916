package controllers

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/sessioncache"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// A manager that starts has every session to take on, and each would cost two store reads: its
// owner record (the claim, phase_owner.go) and its log's tail (readLog). warmStart reads both,
// for every session at once, at the first reconcile that needs either, and each session's first
// reconcile takes its own from that read:
//   - an owner record naming the session (namespace, name and UID) is the claim ClaimOwner
//     would have found: a record changes only by a claim of the same session or by an
//     operator's release, so one read at start is as good as one a moment later;
//   - a cached session whose log has no owner record is claimed then, with every other such
//     session, in a few transactions (Store.ClaimOwners) instead of one each: what its first
//     reconcile would have claimed. A log with another record is left to that reconcile's own
//     claim, which refuses it or re-records the UID;
//   - the tail stands for a read of the log only where nothing can have moved the log past what
//     the status recorded: the same position, in the same store, no boundary waiting and no
//     selection to take on. Then the phases find what a read would have found an instant
//     earlier, before any step since, and decide nothing from it. Anything else reads the log.
//
// What is read is kept as digests and a tail per session, and dropped once taken or
// warmStartKeep after the read, whichever comes first.

// warmStartKeep is how long the read is kept for sessions that have not taken theirs; every
// cached session is reconciled once at start, so only sessions of other managers sharing the
// store (other shards) or deleted meanwhile are still there by then.
const warmStartKeep = time.Minute

type warmStart struct {
	once sync.Once

	mu      sync.Mutex
	storeID string // the store's identity when read
	m       map[warmKey]warmEntry
}

// warmKey is a truncated SHA-256 of a session ID.
type warmKey [16]byte

type warmEntry struct {
	owner claimDigest // of the owner record's UID and namespace/name; zero when none
	tail  harness.Tail
}

func warmKeyOf(sid string) warmKey {
	sum := sha256.Sum256([]byte(sid))
	var k warmKey
	copy(k[:], sum[:])
	return k
}

// ownerDigest names one AgentSession: its namespace, name and UID.
func ownerDigest(ns, name, uid string) claimDigest {
	return digestClaim(types.UID(uid), ns+"/"+name)
}

// warm reads the store once, the first time a reconcile asks. A failed read leaves every
// session to read its own.
func (r *AgentSessionReconciler) warm(ctx context.Context) *warmStart {
	w := &r.warmStart
	w.once.Do(func() {
		id := ""
		if r.StoreID != nil {
			id = r.StoreID()
		}
		m := map[warmKey]warmEntry{}
		err := r.Store.Sessions(context.WithoutCancel(ctx), func(st sessionlog.SessionState) error {
			e := warmEntry{tail: st.Tail}
			if !st.Owner.IsZero() && st.Owner.UID != "" {
				e.owner = ownerDigest(st.Owner.Namespace, st.Owner.Name, st.Owner.UID)
			}
			m[warmKeyOf(st.ID)] = e
			return nil
		})
		if err != nil {
			logf.FromContext(ctx).Error(err, "read every session's log tail and owner at start; each session reads its own")
			return
		}
		r.claimNew(ctx, m)
		w.mu.Lock()
		w.m, w.storeID = m, id
		w.mu.Unlock()
		time.AfterFunc(warmStartKeep, func() {
			w.mu.Lock()
			w.m = nil
			w.mu.Unlock()
		})
	})
	return w
}

// claimNew claims, at once, the log of every cached session that m shows without an owner
// record, and records each claim that holds as this process's (phase_owner.go). A failure
// leaves each session to claim its own log.
func (r *AgentSessionReconciler) claimNew(ctx context.Context, m map[warmKey]warmEntry) {
	if r.sessions == nil {
		return
	}
	cached, err := sessioncache.List(ctx, r.sessions)
	if err != nil {
		logf.FromContext(ctx).Error(err, "list the cached AgentSessions to claim their logs at start; each session claims its own")
		return
	}
	var claims []sessionlog.OwnerClaim
	for _, s := range cached {
		sid := s.Spec.SessionID
		if sid == "" || !s.DeletionTimestamp.IsZero() || s.UID == "" {
			continue
		}
		if e, ok := m[warmKeyOf(sid)]; ok && e.owner != (claimDigest{}) {
			continue // held already, by this session or another
		}
		claims = append(claims, sessionlog.OwnerClaim{SessionID: sid, Owner: sessionlog.Owner{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}})
	}
	if len(claims) == 0 {
		return
	}
	held, err := r.Store.ClaimOwners(context.WithoutCancel(ctx), claims)
	if err != nil {
		logf.FromContext(ctx).Error(err, "claim the logs of new sessions at start; each session claims its own", "sessions", len(claims))
		return
	}
	for i, c := range claims {
		if h := held[i]; h.SameSession(c.Owner) && h.UID == c.Owner.UID {
			r.memory.recordClaim(types.NamespacedName{Namespace: c.Owner.Namespace, Name: c.Owner.Name}, types.UID(c.Owner.UID), c.SessionID)
		}
	}
}

// owns reports whether the owner record read at start names s.
func (w *warmStart) owns(s *agentsv1alpha1.AgentSession) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[warmKeyOf(s.Spec.SessionID)]
	return ok && e.owner != claimDigest{} && e.owner == ownerDigest(s.Namespace, s.Name, string(s.UID))
}

// take removes the session's tail read at start and returns it when it stands for a read of
// the log now (see above), in the store whose identity is storeID ("": not checked, as
// checkLogStore).
func (w *warmStart) take(s *agentsv1alpha1.AgentSession, storeID string) (harness.Tail, bool) {
	w.mu.Lock()
	k := warmKeyOf(s.Spec.SessionID)
	e, ok := w.m[k]
	delete(w.m, k)
	if len(w.m) == 0 {
		w.m = nil
	}
	sameStore := w.storeID == storeID
	w.mu.Unlock()
	pm := &s.Status.PlanMode
	usable := ok && sameStore && (storeID == "" || pm.StoreID == storeID) && e.tail.NextSeq == pm.NextSeq &&
		unanswered(s) == nil && !selectionOutstanding(s)
	return e.tail, usable
}
