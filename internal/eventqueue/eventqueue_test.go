package eventqueue

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// start runs a Recorder over a FakeRecorder (verbose: with the action and annotations); stop
// ends Start and waits for it.
func start(t *testing.T, verbose bool, busy *atomic.Bool, maxHold time.Duration, maxQueued int) (r *Recorder, got chan string, stop func()) {
	t.Helper()
	got = make(chan string, 100)
	r = New(&events.FakeRecorder{Events: got, Verbose: verbose}, busy.Load, maxHold)
	r.MaxQueued = maxQueued
	return r, got, run(t, r)
}

// run starts r; the func it returns ends Start and waits for it.
func run(t *testing.T, r *Recorder) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Start(ctx); err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	return func() { cancel(); <-done }
}

func next(t *testing.T, got chan string, within time.Duration) string {
	t.Helper()
	select {
	case e := <-got:
		return e
	case <-time.After(within):
		t.Fatalf("no Event handed on within %s", within)
		return ""
	}
}

func none(t *testing.T, got chan string, during time.Duration) {
	t.Helper()
	select {
	case e := <-got:
		t.Fatalf("Event %q handed on while reconciles were in flight", e)
	case <-time.After(during):
	}
}

func TestIdleHandsOnAtOnce(t *testing.T) {
	var busy atomic.Bool
	r, got, stop := start(t, false, &busy, time.Minute, 0)
	defer stop()
	r.Eventf(nil, nil, "Normal", "Committed", "EnterPlanMode", "plan mode %s committed", "on")
	if e := next(t, got, 2*time.Second); e != "Normal Committed plan mode on committed" {
		t.Fatalf("got %q", e)
	}
}

func TestBusyHoldsThenHandsOnInOrder(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	r, got, stop := start(t, false, &busy, time.Minute, 0)
	defer stop()
	for _, reason := range []string{"Queued", "Committed", "Cancelled"} {
		r.Eventf(nil, nil, "Normal", reason, "EnterPlanMode", "100%% %s", "done")
	}
	none(t, got, 300*time.Millisecond)
	if n := r.Queued(); n != 3 {
		t.Fatalf("Queued() = %d, want 3", n)
	}
	busy.Store(false)
	for _, want := range []string{"Normal Queued 100% done", "Normal Committed 100% done", "Normal Cancelled 100% done"} {
		if e := next(t, got, 2*time.Second); e != want {
			t.Fatalf("got %q, want %q (in the order recorded)", e, want)
		}
	}
}

func TestMaxHoldBoundsTheWaitUnderLoad(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	r, got, stop := start(t, false, &busy, 200*time.Millisecond, 0)
	defer stop()
	t0 := time.Now()
	r.Eventf(nil, nil, "Warning", "AppendFailed", "Append", "disk full")
	if e := next(t, got, 2*time.Second); e != "Warning AppendFailed disk full" {
		t.Fatalf("got %q", e)
	}
	if d := time.Since(t0); d < 200*time.Millisecond {
		t.Fatalf("handed on after %s while busy, before MaxHold (200ms)", d)
	}
}

func TestStopHandsOnEverythingQueued(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	r, got, stop := start(t, false, &busy, time.Hour, 0)
	r.Eventf(nil, nil, "Normal", "Committed", "LeavePlanMode", "a note with a literal %d")
	stop()
	if e := next(t, got, time.Second); e != "Normal Committed a note with a literal %d" {
		t.Fatalf("got %q", e)
	}
}

func TestFullQueueHandsOnTheOldest(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	r, got, stop := start(t, false, &busy, time.Hour, 2)
	defer stop()
	r.Eventf(nil, nil, "Normal", "First", "A", "1")
	r.Eventf(nil, nil, "Normal", "Second", "A", "2")
	none(t, got, 100*time.Millisecond)
	r.Eventf(nil, nil, "Normal", "Third", "A", "3")
	if e := next(t, got, time.Second); e != "Normal First 1" {
		t.Fatalf("a full queue handed on %q, want the oldest", e)
	}
	if n := r.Queued(); n != 2 {
		t.Fatalf("Queued() = %d, want 2", n)
	}
}

func TestAnnotationsAreKept(t *testing.T) {
	var busy atomic.Bool
	r, got, stop := start(t, true, &busy, time.Minute, 0)
	defer stop()
	r.AnnotatedEventf(nil, nil, map[string]string{"k": "v"}, "Normal", "Committed", "EnterPlanMode", "n")
	if e := next(t, got, 2*time.Second); e != "Normal Committed EnterPlanMode n map[k:v]" {
		t.Fatalf("got %q", e)
	}
}

// A settled queue goes out flushBatch at a time, oldest first: a storm's Events never become
// as many requests in flight at once.
func TestSettledQueueHandsOnInBatches(t *testing.T) {
	const n = 2*flushBatch + 10
	r := New(&events.FakeRecorder{}, func() bool { return false }, time.Minute)
	for i := range n {
		r.Eventf(nil, nil, "Normal", "Committed", "EnterPlanMode", "%d", i)
	}
	note := func(e queued) string { return fmt.Sprintf(e.note, e.args...) }
	if due := r.take(true, flushBatch); len(due) != flushBatch || note(due[0]) != "0" || note(due[flushBatch-1]) != fmt.Sprint(flushBatch-1) {
		t.Fatalf("take handed on %d Events (first %q), want the oldest %d", len(due), note(due[0]), flushBatch)
	}
	if q := r.Queued(); q != n-flushBatch {
		t.Fatalf("Queued() = %d after one batch, want %d", q, n-flushBatch)
	}

	// Through Start: the probe notes how many Events were still queued as each was handed on.
	var busy atomic.Bool
	busy.Store(true)
	p := &probe{notes: make(chan string, n)}
	r = New(p, busy.Load, time.Minute)
	p.r = r
	defer run(t, r)()
	for i := range n {
		r.Eventf(nil, nil, "Normal", "Committed", "EnterPlanMode", "%d", i)
	}
	busy.Store(false)
	for i := range n {
		if e := next(t, p.notes, 2*time.Second); e != fmt.Sprint(i) {
			t.Fatalf("Event %d: got %q (want them in the order recorded)", i, e)
		}
	}
	for i, want := range map[int]int{0: n - flushBatch, flushBatch: n - 2*flushBatch, 2 * flushBatch: 0} {
		if p.queuedAt[i] != want {
			t.Fatalf("when Event %d was handed on %d were still queued, want %d (batches of %d)", i, p.queuedAt[i], want, flushBatch)
		}
	}
}

// probe is a recorder.EventRecorder that notes the queue's length at each Event handed on.
type probe struct {
	r        *Recorder
	queuedAt []int
	notes    chan string
}

func (p *probe) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	p.queuedAt = append(p.queuedAt, p.r.Queued())
	p.notes <- fmt.Sprintf(note, args...)
}

func (p *probe) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, typ, reason, action, note string, args ...any) {
	p.Eventf(regarding, related, typ, reason, action, note, args...)
}

// The queue hands a note's format and arguments on as it got them, so a ("%s", text) note
// reaches the writer as the caller's string: internal/eventsink keeps it for minutes.
func TestNoteArgumentsPassOnAsGiven(t *testing.T) {
	var busy atomic.Bool
	busy.Store(true)
	a := &argsProbe{got: make(chan []any, 1)}
	r := New(a, busy.Load, time.Minute)
	defer run(t, r)()
	text := fmt.Sprint("plan mode ", "on") // made at run time
	r.Eventf(nil, nil, "Normal", "Committed", "EnterPlanMode", "%s", text)
	busy.Store(false)
	select {
	case args := <-a.got:
		if s, ok := args[0].(string); !ok || len(args) != 1 || unsafe.StringData(s) != unsafe.StringData(text) {
			t.Fatalf("handed on %#v, want the caller's string itself", args)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no Event handed on within 2s")
	}
}

type argsProbe struct{ got chan []any }

func (p *argsProbe) Eventf(_, _ runtime.Object, _, _, _, _ string, args ...any) { p.got <- args }

func (p *argsProbe) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, typ, reason, action, note string, args ...any) {
	p.Eventf(regarding, related, typ, reason, action, note, args...)
}
