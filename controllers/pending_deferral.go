package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// A user's selection made during a turn needs no status write to reach the agent: the agent
// asks at its next step boundary whenever spec.planMode.active differs from
// status.planMode.selection (docs/protocol.md, "When to ask"), and kstatus and kubectl wait
// read the session as in progress while status.observedGeneration lags the generation. So the
// manager holds that selection's "pending" write for PendingStatusDelay: when the agent's
// report comes first, the one answer carries the commit and the toggle costs the report and
// the answer; when it does not, the pending status is written as before. What is held is only
// ever that write: a reconcile with anything else to write writes it all.

// deferral is a held pending write: the selection, the turn it was made in, and when the
// write is due.
type deferral struct {
	uid       types.UID
	selection bool
	turn      int64
	due       time.Time
}

// pendingDeferrals are the held writes, by session. They live in memory only: after a restart
// a selection is held once more, and one made in a turn that ended meanwhile is taken as made
// between turns.
type pendingDeferrals struct {
	mu sync.Mutex
	m  map[types.NamespacedName]deferral
}

// hold records that the pending write of selection x, made in turn `turn`, is held, and
// returns how long it may still be held (zero or less: write it now). A selection changed
// while held keeps the first one's deadline, so a toggling user cannot hold it for ever.
func (p *pendingDeferrals) hold(s *agentsv1alpha1.AgentSession, x bool, turn int64, now time.Time, delay time.Duration) time.Duration {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.m[key]
	if !ok || d.uid != s.UID {
		d = deferral{uid: s.UID, turn: turn, due: now.Add(delay)}
	}
	d.selection = x
	if p.m == nil {
		p.m = map[types.NamespacedName]deferral{}
	}
	p.m[key] = d
	return d.due.Sub(now)
}

// madeInTurn is the turn a held selection x of session s was made in.
func (p *pendingDeferrals) madeInTurn(s *agentsv1alpha1.AgentSession, x bool) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.m[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}]
	if !ok || d.uid != s.UID || d.selection != x {
		return 0, false
	}
	return d.turn, true
}

// forget drops a session's held write: its status was written, or it is gone.
func (p *pendingDeferrals) forget(key types.NamespacedName) {
	p.mu.Lock()
	delete(p.m, key)
	p.mu.Unlock()
}

// onlyPendingDiffers reports that next differs from old in nothing but what taking a pending
// selection on writes: the selection, the pending fields, observedGeneration and the
// conditions that say a selection waits.
func onlyPendingDiffers(old, next agentsv1alpha1.AgentSessionStatus) bool {
	masked := next // fields are replaced, never written through: no deep copy
	masked.ObservedGeneration = old.ObservedGeneration
	masked.Conditions = old.Conditions
	pm, was := &masked.PlanMode, old.PlanMode
	pm.Selection, pm.Pending, pm.PendingActive, pm.PendingSource, pm.QueuedInTurn = was.Selection, was.Pending, was.PendingActive, was.PendingSource, was.QueuedInTurn
	return !writeDue(old, masked)
}
