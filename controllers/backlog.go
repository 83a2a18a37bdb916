package controllers

import (
	"sync/atomic"
	"time"
)

// backlogQuiet is how long after every worker was last busy the reconciler still counts as
// behind: workers finish and pick up the next session continually in a storm, so the moment
// all are busy is sampled, not held.
const backlogQuiet = 250 * time.Millisecond

// backlog tells whether the reconciler is behind its work: every worker busy just now. The
// manager's Event writer holds Events while it is (eventsink.Options.HoldWhile), so that in a
// storm the Events queue behind the status writes instead of competing with them.
type backlog struct {
	workers  int64
	inflight atomic.Int64
	fullAt   atomic.Int64 // when every worker was last busy (Unix nanoseconds)
}

// start records a reconcile begun; call the returned func when it ends.
func (b *backlog) start() func() {
	if b.inflight.Add(1) >= max(b.workers, 1) {
		b.fullAt.Store(time.Now().UnixNano())
	}
	return func() { b.inflight.Add(-1) }
}

func (b *backlog) behind() bool {
	at := b.fullAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) < backlogQuiet
}

// Behind reports whether every worker of the reconciler was busy just now (a storm).
func (r *AgentSessionReconciler) Behind() bool { return r.backlog.behind() }
