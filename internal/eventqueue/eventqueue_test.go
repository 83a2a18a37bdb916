package eventqueue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"
)

// start runs a Recorder over a FakeRecorder (verbose: with the action and annotations); stop
// ends Start and waits for it.
func start(t *testing.T, verbose bool, busy *atomic.Bool, maxHold time.Duration, maxQueued int) (r *Recorder, got chan string, stop func()) {
	t.Helper()
	got = make(chan string, 100)
	r = New(&events.FakeRecorder{Events: got, Verbose: verbose}, busy.Load, maxHold)
	r.MaxQueued = maxQueued
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Start(ctx); err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	return r, got, func() { cancel(); <-done }
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
