package controllers

import (
	"sync"
	"time"
)

// The storm rule. The reconciler enters a storm when backlogEnter reconciles began within
// backlogWindow: a storm starts hundreds of reconciles a second (and one the API server admits
// in waves never keeps every worker busy at once), where a person's toggles and an agent's
// steps start a few. It leaves the storm once fewer than backlogLeave began within
// backlogWindow, so the storm's tail (writes the API server refused with 429 and the clients
// send again) still counts as the storm.
const (
	backlogWindow = time.Second
	backlogEnter  = 50
	backlogLeave  = 10
)

// backlog tells whether the reconciler is behind its work (in a storm). The manager's Event
// writer holds Events while it is (eventsink.Options.HoldWhile), so that in a storm the
// Events queue behind the status writes instead of competing with them.
type backlog struct {
	mu     sync.Mutex
	starts [backlogEnter]int64 // the latest reconcile starts (Unix nanoseconds), a ring
	next   int                 // where the next start goes: the oldest start
	storm  bool
}

// start records a reconcile begun.
func (b *backlog) start() {
	now := time.Now().UnixNano()
	b.mu.Lock()
	b.starts[b.next] = now
	b.next = (b.next + 1) % len(b.starts)
	if b.within(now, backlogEnter) {
		b.storm = true
	}
	b.mu.Unlock()
}

// within reports whether the n latest starts all began within backlogWindow of now; b.mu is
// held.
func (b *backlog) within(now int64, n int) bool {
	at := b.starts[(b.next-n+len(b.starts))%len(b.starts)] // zero until n starts were seen
	return at != 0 && time.Duration(now-at) < backlogWindow
}

func (b *backlog) behind() bool {
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.storm && !b.within(now, backlogLeave) {
		b.storm = false
	}
	return b.storm
}

// Behind reports whether the reconciler is in a storm (the storm rule above).
func (r *AgentSessionReconciler) Behind() bool { return r.backlog.behind() }
