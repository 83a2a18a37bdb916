package controllers

import (
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// sessionMemory is the reconciler's only per-session side state: what it last wrote, how its
// next write must be guarded, and the log it has claimed for the session (phase_owner.go). Entries are forgotten when the session is deleted. A plain
// map under a mutex keeps each entry small for many sessions. The zero value is ready to use.
type sessionMemory struct {
	mu sync.Mutex
	m  map[types.NamespacedName]sessionRecord
}

type sessionRecord struct {
	// written is the digest of the manager-owned status this process last wrote, or found to
	// match the log when it had written none.
	written statusDigest
	known   bool
	// guardByVersion: a field-guarded write was refused, so the next one is guarded by the
	// resourceVersion instead (a stored value in another shape can never fail it forever).
	guardByVersion bool
	// claimed identifies the (UID, sessionID) this process recorded as the owner of that log,
	// so a settled session costs no ClaimOwner call. A digest, not the two strings: the
	// cache replaces the session's object on every write, and copies kept here would outlive
	// it, one pair per session.
	claimed claimDigest
}

// claimDigest is a truncated SHA-256 of a session's UID and spec.sessionID; the zero value
// means no claim.
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

// statusDigest identifies the manager-owned part of a status (observedGeneration, planMode,
// review, conditions) by a truncated SHA-256 of its JSON. Both sides of a comparison are
// decoded from the API server's JSON (a write's response, the cache's watch event), so equal
// values encode equally.
type statusDigest [16]byte

func digestStatus(s *agentsv1alpha1.AgentSessionStatus) statusDigest {
	owned := *s
	owned.Agent = nil            // the agent's part: its writes never make the manager's write stale
	b, _ := json.Marshal(&owned) // plain fields, pointers and metav1.Time: cannot fail
	sum := sha256.Sum256(b)
	return statusDigest(sum[:16])
}

// holds reports whether d is the manager-owned status this process last wrote (or checked).
func (m *sessionMemory) holds(key types.NamespacedName, d statusDigest) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.m[key]
	return rec.known && rec.written == d
}

// heldDigest returns the digest held for the session, if any.
func (m *sessionMemory) heldDigest(key types.NamespacedName) (statusDigest, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.m[key]
	return rec.written, rec.known
}

// wrote records a status the API server stored for this process.
func (m *sessionMemory) wrote(key types.NamespacedName, d statusDigest) {
	m.update(key, func(rec *sessionRecord) { rec.written, rec.known, rec.guardByVersion = d, true, false })
}

// verified records a status a full reconcile found to match the log (no write was due) as if
// this process had written it, when it holds none: after a restart, the next echo of an
// unchanged session then takes the settled path instead of reading the log tail. Only with
// none held: one that differs means the cache may lag this process's own write.
func (m *sessionMemory) verified(key types.NamespacedName, d statusDigest) {
	m.update(key, func(rec *sessionRecord) {
		if !rec.known {
			rec.written, rec.known = d, true
		}
	})
}

func (m *sessionMemory) guardsByVersion(key types.NamespacedName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[key].guardByVersion
}

func (m *sessionMemory) refused(key types.NamespacedName) {
	m.update(key, func(rec *sessionRecord) { rec.guardByVersion = true })
}

// holdsClaim reports whether this process claimed the log of sid for the session with uid.
func (m *sessionMemory) holdsClaim(key types.NamespacedName, uid types.UID, sid string) bool {
	d := digestClaim(uid, sid)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[key].claimed == d
}

func (m *sessionMemory) claimed(key types.NamespacedName, uid types.UID, sid string) {
	d := digestClaim(uid, sid)
	m.update(key, func(rec *sessionRecord) { rec.claimed = d })
}

func (m *sessionMemory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}

func (m *sessionMemory) update(key types.NamespacedName, f func(*sessionRecord)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	rec := m.m[key]
	f(&rec)
	m.m[key] = rec
}

func (m *sessionMemory) init() {
	if m.m == nil {
		m.m = map[types.NamespacedName]sessionRecord{}
	}
}
