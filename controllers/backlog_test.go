package controllers

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

func TestBacklogStormBeginsAtTheEnterWriteRateAndLastsThroughItsTail(t *testing.T) {
	var b backlog
	entered := 0
	b.entered = func() { entered++ }
	for i := range backlogEnter - 1 {
		b.add()
		if b.behind() {
			t.Fatalf("behind after %d status writes, fewer than the %d that begin a storm", i+1, backlogEnter)
		}
	}
	b.add()
	if !b.behind() {
		t.Fatalf("not behind after %d status writes within one window", backlogEnter)
	}
	// The tail: writes older than the leave window except the latest backlogLeave, still a storm.
	b.age(backlogLeave, 2*backlogLeaveWindow)
	if !b.behind() {
		t.Fatalf("storm over with %d writes within the leave window", backlogLeave)
	}
	b.age(backlogLeave-1, 2*backlogLeaveWindow)
	if b.behind() {
		t.Fatalf("still behind with %d writes within the leave window", backlogLeave-1)
	}
	if entered != 1 {
		t.Fatalf("storms entered: %d, want 1", entered)
	}
}

// A storm the API server admits in waves: each wave brings a storm's rate of changes, and
// between two waves nothing is seen for longer than the enter window (a 429's Retry-After is a
// second) but shorter than the leave window. The storm lasts through the gap and is entered
// once; its held Events do not go out between the waves.
func TestBacklogStormLastsThroughTheGapsBetweenWaves(t *testing.T) {
	var b backlog
	entered := 0
	b.entered = func() { entered++ }
	for range backlogEnter {
		b.add()
	}
	if !b.behind() || entered != 1 {
		t.Fatalf("after a wave of %d changes: behind %v, storms entered %d; want true, 1", backlogEnter, b.behind(), entered)
	}
	gap := backlogWindow + (backlogLeaveWindow-backlogWindow)/2
	b.age(0, gap) // every change of the wave is now gap old
	if !b.behind() {
		t.Fatalf("storm over %s after a wave, within the leave window (%s)", gap, backlogLeaveWindow)
	}
	for range backlogEnter { // the next wave
		b.add()
	}
	if !b.behind() || entered != 1 {
		t.Fatalf("after the second wave: behind %v, storms entered %d; want true, 1", b.behind(), entered)
	}
	b.age(0, backlogLeaveWindow)
	if b.behind() {
		t.Fatalf("still behind %s after the last wave", backlogLeaveWindow)
	}
	for range backlogEnter { // a storm after the last one ended is a storm of its own
		b.add()
	}
	if !b.behind() || entered != 2 {
		t.Fatalf("a later storm: behind %v, storms entered %d; want true, 2", b.behind(), entered)
	}
}

// age makes every recorded change d old but the latest from of them.
func (b *backlog) age(from int, d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := from; i < len(b.seen); i++ {
		b.seen[(b.next-1-i+len(b.seen))%len(b.seen)] = time.Now().Add(-d).UnixNano()
	}
}

var _ = Describe("the storm rule", func() {
	It("holds no Event for sessions whose reconciles fail and retry, however many retry each second", func() {
		be := openBackend("sqlite")
		ns := newNamespace(true)
		tm := startManager(ns, be.mgrStore, managerOptions{})
		const n = 40
		agents := make([]*agent, n)
		for i := range agents {
			agents[i] = newSession(ns, fmt.Sprintf("s%02d", i), nil, nil, be.agentStore)
		}
		for _, a := range agents {
			a.awaitStatus(false, false)
		}

		// The store stops answering; every session gets a selection to take on, so each
		// reconcile reads the log, fails, and is retried at the backoff's cap (500 ms here).
		tm.store.failTail.Store(true)
		for _, a := range agents {
			setActive(a.key, T)
		}
		for _, a := range agents {
			Eventually(func() string { return readyReason(a.get()) }, timeout, interval).
				Should(Equal("False/" + agentsv1alpha1.ReasonLogStoreError))
		}
		// Their failure writes may have been a storm; once written, the retries write nothing.
		Eventually(tm.r.Behind, timeout, interval).Should(BeFalse())
		writes, failed := tm.statusWrites.Load(), tm.store.tailsFailed.Load()
		Consistently(tm.r.Behind, quiet, interval).Should(BeFalse())
		retries := tm.store.tailsFailed.Load() - failed
		Expect(retries).To(BeNumerically(">=", int64(backlogEnter*quiet/backlogWindow)),
			"the sessions retried faster than a storm writes statuses, and still no storm")
		Expect(tm.statusWrites.Load()).To(Equal(writes), "the retries wrote no status")

		tm.store.failTail.Store(false)
		for _, a := range agents {
			a.awaitStatus(true, false)
		}
	})
})

func TestBacklogCountsSessionChangesSeen(t *testing.T) {
	var b backlog
	changes := b.changes()
	for i := range backlogEnter {
		if !changes.Update(ctrlevent.UpdateEvent{}) {
			t.Fatalf("session change %d not let through to the reconciler", i+1)
		}
	}
	if !b.behind() {
		t.Fatalf("not behind after %d session changes within one window, no status written", backlogEnter)
	}
}
