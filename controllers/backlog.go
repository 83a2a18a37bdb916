package controllers

import (
	"sync"
	"time"
)

// The storm rule. The reconciler is in a storm from backlogEnter status writes sent within
// backlogWindow until fewer than backlogLeave were: a storm writes hundreds of statuses a
// second (and one the API server admits in waves never keeps every worker busy at once), where
// a person's toggles write a few and an agent's steps none. The leave rate keeps the storm's
// tail (writes the API server refused with 429 and the clients send again) in the storm. It
// counts writes, not reconciles: sessions whose reconciles fail and retry at the backoff's cap
// write nothing, and are no storm however many there are.
const (
	backlogWindow = time.Second
	backlogEnter  = 25
	backlogLeave  = 5
)

// backlog tells whether the reconciler is behind its work (in a storm). The manager's Event
// writer holds Events while it is (eventsink.Options.HoldWhile), so that in a storm the
// Events queue behind the status writes instead of competing with them.
type backlog struct {
	mu     sync.Mutex
	writes [backlogEnter]int64 // the latest status writes sent (Unix nanoseconds), a ring
	next   int                 // where the next write goes: the oldest write
	storm  bool
}

// wrote records a status write sent.
func (b *backlog) wrote() {
	now := time.Now().UnixNano()
	b.mu.Lock()
	b.writes[b.next] = now
	b.next = (b.next + 1) % len(b.writes)
	if b.within(now, backlogEnter) {
		b.storm = true
	}
	b.mu.Unlock()
}

// within reports whether the n latest writes were all sent within backlogWindow of now; b.mu
// is held.
func (b *backlog) within(now int64, n int) bool {
	at := b.writes[(b.next-n+len(b.writes))%len(b.writes)] // zero until n writes were seen
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
