// Package eventqueue holds the manager's Events while reconciles are in flight, so that under
// load they trail the status writes instead of competing with them for the API server.
//
// An Event written as soon as it is recorded competes with the status writes: in a storm of
// toggles, an Event create arrives beside each status write users wait for, and each costs
// the API server a sizeable share of a whole toggle's CPU (docs/performance.md).
// Events are best-effort observability; the status is what `kubectl get`, kstatus and the
// agents read. So a Recorder queues each Event and hands it to the real recorder once no
// reconcile has been in flight for 100 ms, or once it has waited MaxHold, whichever comes
// first. Nothing is dropped: a full queue hands its oldest Event on at once, and stopping
// hands on every queued Event. Otherwise Events are handed on at most flushBatch per
// pollInterval, so a storm's thousands do not become as many requests in flight at once.
package eventqueue

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

const (
	// pollInterval is how often the queue checks whether reconciles are in flight.
	pollInterval = 25 * time.Millisecond
	// settle is how long no reconcile must have been seen in flight before the queue is sent:
	// in a storm the workers can all be idle for a moment between watch events.
	settle = 100 * time.Millisecond
	// flushBatch is the most Events handed on per pollInterval. internal/eventsink bounds the
	// writes in flight itself; the batch keeps a storm's hand-on smooth instead of handing
	// thousands on at once.
	flushBatch = 50
)

// DefaultMaxQueued bounds the queue (an Event holds a reference to the object it is about).
const DefaultMaxQueued = 10000

type queued struct {
	at                  time.Time
	regarding, related  runtime.Object
	annotations         map[string]string
	typ, reason, action string
	// note and args as given: Next formats them when the Event is handed on, so a note passed
	// as ("%s", text) reaches it as the caller's string, not a copy (internal/eventsink keeps
	// notes for minutes). Callers pass values that do not change: the reconciler's strings.
	note string
	args []any
}

// Recorder is a recorder.EventRecorder that queues Events for Next. Make it with New and run
// it with Start (it is a manager.Runnable).
type Recorder struct {
	// Next sends the Events (the manager's events.k8s.io recorder).
	Next recorder.EventRecorder
	// Busy reports whether reconciles are in flight.
	Busy func() bool
	// MaxHold is the longest an Event waits while reconciles stay in flight.
	MaxHold time.Duration
	// MaxQueued bounds the queue; 0 means DefaultMaxQueued.
	MaxQueued int

	mu   sync.Mutex
	q    []queued
	wake chan struct{} // a new Event: check now rather than at the next tick
}

var _ recorder.EventRecorder = (*Recorder)(nil)

// New returns a Recorder for next; see the fields.
func New(next recorder.EventRecorder, busy func() bool, maxHold time.Duration) *Recorder {
	return &Recorder{Next: next, Busy: busy, MaxHold: maxHold, wake: make(chan struct{}, 1)}
}

// Eventf queues an Event (see events.EventRecorder).
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.AnnotatedEventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

// AnnotatedEventf queues an Event with annotations (see events.AnnotatedEventRecorder).
func (r *Recorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	e := queued{at: time.Now(), regarding: regarding, related: related, annotations: annotations,
		typ: eventtype, reason: reason, action: action, note: note, args: args}
	limit := r.MaxQueued
	if limit <= 0 {
		limit = DefaultMaxQueued
	}
	r.mu.Lock()
	var overflow []queued
	if len(r.q) >= limit {
		overflow = append(overflow, r.q[0])
		r.q = r.q[1:]
	}
	r.q = append(r.q, e)
	r.mu.Unlock()
	r.send(overflow)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Queued is the number of Events waiting.
func (r *Recorder) Queued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.q)
}

// Start hands queued Events on until ctx ends, then hands on the rest.
func (r *Recorder) Start(ctx context.Context) error {
	var lastBusy, lastSent time.Time
	for {
		// Poll only while Events wait: an empty queue sleeps until the next Event, whose
		// reconcile is then still in flight (so lastBusy need not be tracked meanwhile).
		var poll <-chan time.Time
		if r.Queued() > 0 {
			poll = time.After(pollInterval)
		}
		select {
		case <-ctx.Done():
			r.send(r.take(true, 0))
			return nil
		case <-r.wake:
		case <-poll:
		}
		now := time.Now()
		if r.Busy() {
			lastBusy = now
		}
		if now.Sub(lastSent) < pollInterval {
			continue // a batch went out this interval; the poll comes back for the rest
		}
		if due := r.take(now.Sub(lastBusy) >= settle, flushBatch); len(due) > 0 {
			r.send(due)
			lastSent = now
		}
	}
}

// take removes the Events due, the oldest first and at most limit of them (0: no limit): all
// of them when the reconciles have settled, else those that have waited MaxHold.
func (r *Recorder) take(all bool, limit int) []queued {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.q)
	if !all {
		cut := time.Now().Add(-r.MaxHold)
		n = 0
		for n < len(r.q) && !r.q[n].at.After(cut) {
			n++
		}
	}
	if limit > 0 {
		n = min(n, limit)
	}
	if n == 0 {
		return nil
	}
	due := r.q[:n:n]
	r.q = append([]queued(nil), r.q[n:]...)
	return due
}

func (r *Recorder) send(es []queued) {
	for _, e := range es {
		note, args := e.note, e.args
		if len(args) == 0 {
			note, args = "%s", []any{e.note} // a note without arguments is taken as it is
		}
		if e.annotations != nil {
			r.Next.AnnotatedEventf(e.regarding, e.related, e.annotations, e.typ, e.reason, e.action, note, args...)
			continue
		}
		r.Next.Eventf(e.regarding, e.related, e.typ, e.reason, e.action, note, args...)
	}
}
