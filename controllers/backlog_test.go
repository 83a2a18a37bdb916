package controllers

import "testing"

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
