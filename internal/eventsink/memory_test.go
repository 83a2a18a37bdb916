package eventsink

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// BenchmarkSeriesCacheBytes reports what a Sink keeps per written Event for series aggregation
// (until FinishAfter): 20,000 Events about 10,000 sessions, as two toggle storms of 10,000
// sessions record them, recorded and then marked written. go test ./internal/eventsink -run '^$' -bench Cache
func BenchmarkSeriesCacheBytes(b *testing.B) {
	const sessions, perSession = 10000, 2
	objs := make([]*corev1.ConfigMap, sessions)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench",
			Name: fmt.Sprintf("session-%05d", i), UID: types.UID(fmt.Sprintf("%08d-0000-4000-8000-000000000000", i))}}
	}
	// As the reconciler records them: ("%s", text), each text made once.
	reasons := [perSession][3]string{
		{"Committed", "EnterPlanMode", "plan mode on committed to the session log"},
		{"Committed", "LeavePlanMode", "plan mode off committed to the session log"}}
	var perEntry float64
	for b.Loop() {
		s := New(nil, clientgoscheme.Scheme, "planmode-manager", "planmode-manager-bench", logr.Discard(),
			Options{MaxQueued: sessions * perSession})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, o := range objs {
			for _, r := range reasons {
				s.Eventf(o, nil, corev1.EventTypeNormal, r[0], r[1], "%s", r[2])
			}
		}
		s.mu.Lock()
		for _, j := range s.queue { // as the writers would: only the cache is left
			j.e.queued = false
			s.wrote(j, j.e.count)
		}
		s.queue = nil
		n := len(s.entries) + len(s.onces)
		s.mu.Unlock()
		s.sweep() // nothing has ended yet; the maps are made to the size of what is left
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perEntry, "B/entry")
}

// A map holding under a quarter of its peak is made again at its size; otherwise it is kept.
func TestShrink(t *testing.T) {
	m := map[int]int{}
	for i := range 100 {
		m[i] = i
	}
	peak := len(m)
	for i := range 70 {
		delete(m, i)
	}
	if got := shrink(m, &peak); len(got) != 30 || peak != 100 {
		t.Fatalf("30 of a peak of 100: got %d entries, peak %d; want the same map (30, 100)", len(got), peak)
	}
	for i := 70; i < 80; i++ {
		delete(m, i)
	}
	got := shrink(m, &peak)
	if len(got) != 20 || peak != 20 {
		t.Fatalf("20 of a peak of 100: got %d entries, peak %d; want a new map (20, 20)", len(got), peak)
	}
	got[-1] = -1
	if _, ok := m[-1]; ok {
		t.Fatal("shrink returned the same map, want a new one")
	}
	for i := 80; i < 100; i++ {
		if got[i] != i {
			t.Fatalf("entry %d lost in the copy", i)
		}
	}
}
