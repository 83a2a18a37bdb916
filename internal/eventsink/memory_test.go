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
// (until FinishAfter): 30,000 Events about 10,000 sessions, as in a 10,000-session boundary
// storm, recorded and then marked written. go test ./internal/eventsink -run '^$' -bench Cache
func BenchmarkSeriesCacheBytes(b *testing.B) {
	const sessions, perSession = 10000, 3
	objs := make([]*corev1.ConfigMap, sessions)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench",
			Name: fmt.Sprintf("session-%05d", i), UID: types.UID(fmt.Sprintf("%08d-0000-4000-8000-000000000000", i))}}
	}
	// As the reconciler records them: ("%s", text), each text made once.
	reasons := [perSession][3]string{
		{"Queued", "EnterPlanMode", "plan mode on queued: applies at the agent's next step boundary"},
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
		s.queue = nil // as once written: only the cache is left
		for _, e := range s.entries {
			e.queued, e.written = false, 1
		}
		s.mu.Unlock()
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(s.entries))
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perEntry, "B/entry")
}
