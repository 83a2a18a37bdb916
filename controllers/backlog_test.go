package controllers

import (
	"testing"
	"time"
)

func TestBacklogStormBeginsAtTheEnterRateAndLastsThroughItsTail(t *testing.T) {
	var b backlog
	for i := range backlogEnter - 1 {
		b.start()
		if b.behind() {
			t.Fatalf("behind after %d reconciles, fewer than the %d that begin a storm", i+1, backlogEnter)
		}
	}
	b.start()
	if !b.behind() {
		t.Fatalf("not behind after %d reconciles within one window", backlogEnter)
	}
	// The tail: starts older than the window except the latest backlogLeave, still a storm.
	age := func(from int, d time.Duration) {
		b.mu.Lock()
		for i := range b.starts {
			if k := (b.next - 1 - i + len(b.starts)) % len(b.starts); i >= from {
				b.starts[k] = time.Now().Add(-d).UnixNano()
			}
		}
		b.mu.Unlock()
	}
	age(backlogLeave, 2*backlogWindow)
	if !b.behind() {
		t.Fatalf("storm over with %d starts within the window", backlogLeave)
	}
	age(backlogLeave-1, 2*backlogWindow)
	if b.behind() {
		t.Fatalf("still behind with %d starts within the window", backlogLeave-1)
	}
}
