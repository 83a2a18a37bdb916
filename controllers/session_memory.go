package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// sessionMemory is what this process remembers of each session between its reconciles: the
// log claim it recorded (phase_owner.go) and the digest of the manager-owned status it last
// wrote or found to match the log (status_patcher.go). Both live in one map, since every
// session the manager has taken on has both: one entry per session holds the manager's
// idle memory to one table's slots and overhead instead of two.
type sessionMemory struct {
	mu sync.Mutex
	m  map[types.NamespacedName]sessionDigests
}

// sessionDigests is one session's entry; a zero digest is a real value, so each has a flag.
type sessionDigests struct {
	claim     claimDigest
	status    statusDigest
	hasClaim  bool
	hasStatus bool
}

// claimed reports whether this process recorded the log of sid as the session with uid's.
func (m *sessionMemory) claimed(key types.NamespacedName, uid types.UID, sid string) bool {
	d := digestClaim(uid, sid)
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[key]
	return ok && e.hasClaim && e.claim == d
}

// recordClaim remembers that this process recorded the log of sid as the session with uid's.
func (m *sessionMemory) recordClaim(key types.NamespacedName, uid types.UID, sid string) {
	d := digestClaim(uid, sid)
	m.update(key, func(e *sessionDigests) { e.claim, e.hasClaim = d, true })
}

// status returns the digest of the manager-owned status remembered for the session.
func (m *sessionMemory) status(key types.NamespacedName) (statusDigest, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[key]
	return e.status, ok && e.hasStatus
}

// rememberStatus records d as the session's manager-owned status; with onlyFirst, only when
// none is remembered yet.
func (m *sessionMemory) rememberStatus(key types.NamespacedName, d statusDigest, onlyFirst bool) {
	m.update(key, func(e *sessionDigests) {
		if !onlyFirst || !e.hasStatus {
			e.status, e.hasStatus = d, true
		}
	})
}

func (m *sessionMemory) update(key types.NamespacedName, set func(*sessionDigests)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]sessionDigests{}
	}
	e := m.m[key]
	set(&e)
	m.m[key] = e
}

// forget drops everything remembered of a session (it was deleted).
func (m *sessionMemory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}
