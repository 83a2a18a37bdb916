package controllers

import (
	"sync"
	"time"

	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// The storm rule. The reconciler is in a storm from backlogEnter session changes seen or
// status writes sent within backlogWindow until fewer than backlogLeave were within
// backlogLeaveWindow: a storm brings and writes hundreds of sessions a second, where a
// person's toggles bring a few and an agent's steps none. Changes seen count as well as
// writes: a storm's first commits go out while the API server is still taking its changes in,
// slower than its writes will be. The leave rule keeps the storm's tail (writes the API server
// refused with 429 and the clients send again) in the storm, and its window outlasts the gaps
// of a storm the API server admits in waves: a 429 tells the client to wait a second
// (Retry-After), so a slow storm can pass more than a second with nothing seen or sent, and a
// one-second leave window let its held Events out between two waves. It counts no reconciles:
// sessions whose reconciles fail and retry at the backoff's cap change and write nothing, and
// are no storm however many there are.
const (
	backlogWindow      = time.Second
	backlogEnter       = 25
	backlogLeaveWindow = 3 * time.Second
	backlogLeave       = 5
)

// backlog tells whether the reconciler is behind its work (in a storm). The manager's Event
// writer holds Events while it is (eventsink.Options.HoldWhile), so that in a storm the
// Events queue behind the status writes instead of competing with them.
type backlog struct {
	// entered, when set, is told each time a storm begins (planmode_storms_total).
	entered func()

	mu    sync.Mutex
	seen  [backlogEnter]int64 // the latest changes seen and writes sent (Unix nanoseconds), a ring
	next  int                 // where the next goes: the oldest
	storm bool
}

// add records a session change seen or a status write sent.
func (b *backlog) add() {
	now := time.Now().UnixNano()
	b.mu.Lock()
	b.leave(now)
	b.seen[b.next] = now
	b.next = (b.next + 1) % len(b.seen)
	began := !b.storm && b.within(now, backlogEnter, backlogWindow)
	if began {
		b.storm = true
	}
	b.mu.Unlock()
	if began && b.entered != nil {
		b.entered()
	}
}

// within reports whether the n latest were all within d of now; b.mu is held.
func (b *backlog) within(now int64, n int, d time.Duration) bool {
	at := b.seen[(b.next-n+len(b.seen))%len(b.seen)] // zero until n were recorded
	return at != 0 && time.Duration(now-at) < d
}

// leave ends the storm if fewer than backlogLeave were seen within backlogLeaveWindow; b.mu
// is held.
func (b *backlog) leave(now int64) {
	if b.storm && !b.within(now, backlogLeave, backlogLeaveWindow) {
		b.storm = false
	}
}

func (b *backlog) behind() bool {
	now := time.Now().UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.leave(now)
	return b.storm
}

// Behind reports whether the reconciler is in a storm (the storm rule above).
func (r *AgentSessionReconciler) Behind() bool { return r.backlog.behind() }

// changes is the predicate of the reconciler's session watch: it lets every event through and
// counts the changes in the storm rule.
func (b *backlog) changes() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(ctrlevent.UpdateEvent) bool { b.add(); return true }}
}
