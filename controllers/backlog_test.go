package controllers

import (
	"testing"
	"time"
)

func TestBacklogIsBehindOnlyWithEveryWorkerBusy(t *testing.T) {
	b := backlog{workers: 2}
	if b.behind() {
		t.Fatal("behind before any reconcile")
	}
	done1 := b.start()
	if b.behind() {
		t.Fatal("behind with one of two workers busy")
	}
	done2 := b.start()
	if !b.behind() {
		t.Fatal("not behind with both workers busy")
	}
	done2()
	done1()
	if got := b.inflight.Load(); got != 0 {
		t.Fatalf("%d reconciles in flight after both ended", got)
	}
}

func TestBacklogIsBehindWhileReconcilesStartFasterThanTheRateRule(t *testing.T) {
	b := backlog{workers: 2}
	limit := backlogStarts
	// One worker at a time, as a storm admitted in waves looks: never every worker busy.
	for i := range limit - 1 {
		b.start()()
		if b.behind() {
			t.Fatalf("behind after %d reconciles, fewer than the %d the rule allows a window", i+1, limit)
		}
	}
	b.start()()
	if !b.behind() {
		t.Fatalf("not behind after %d reconciles within one window", limit)
	}
	// The same starts spread over more than a window are not a storm.
	old := time.Now().Add(-2 * backlogWindow).UnixNano()
	b.mu.Lock()
	for i := range b.starts {
		b.starts[i] = old
	}
	b.mu.Unlock()
	b.fullAt.Store(0)
	if b.behind() {
		t.Fatal("behind with every recorded start older than the window")
	}
}
