package controllers

import (
	"sync"
	"sync/atomic"
	"time"
)

// backlogQuiet is how long after every worker was last busy the reconciler still counts as
// behind: workers finish and pick up the next session continually in a storm, so the moment
// all are busy is sampled, not held.
const backlogQuiet = 250 * time.Millisecond

// backlogWindow and backlogStarts set the rate rule: the reconciler is behind while it began
// more than backlogStarts reconciles within backlogWindow. A storm the API server admits in
// waves never keeps every worker busy at once, yet starts hundreds of reconciles a second; a
// person's toggles and an agent's steps start a few.
const (
	backlogWindow = time.Second
	backlogStarts = 50
)

// backlog tells whether the reconciler is behind its work: every worker busy just now, or
// reconciles beginning faster than the rate rule allows. The manager's Event writer holds
// Events while it is (eventsink.Options.HoldWhile), so that in a storm the Events queue behind
// the status writes instead of competing with them.
type backlog struct {
	workers  int64
	inflight atomic.Int64
	fullAt   atomic.Int64 // when every worker was last busy (Unix nanoseconds)

	mu     sync.Mutex
	starts []int64 // the latest reconcile starts (Unix nanoseconds), a ring
	next   int     // where the next start goes; the oldest start once the ring is full
}

// start records a reconcile begun; call the returned func when it ends.
func (b *backlog) start() func() {
	now := time.Now().UnixNano()
	if b.inflight.Add(1) >= max(b.workers, 1) {
		b.fullAt.Store(now)
	}
	b.mu.Lock()
	if b.starts == nil {
		b.starts = make([]int64, backlogStarts)
	}
	b.starts[b.next] = now
	b.next = (b.next + 1) % len(b.starts)
	b.mu.Unlock()
	return func() { b.inflight.Add(-1) }
}

func (b *backlog) behind() bool {
	now := time.Now()
	if at := b.fullAt.Load(); at != 0 && now.Sub(time.Unix(0, at)) < backlogQuiet {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.starts == nil {
		return false
	}
	oldest := b.starts[b.next] // zero until the ring has filled once
	return oldest != 0 && now.Sub(time.Unix(0, oldest)) < backlogWindow
}

// Behind reports whether the reconciler is in a storm: every worker busy just now, or
// reconciles beginning faster than the rate rule allows.
func (r *AgentSessionReconciler) Behind() bool { return r.backlog.behind() }
