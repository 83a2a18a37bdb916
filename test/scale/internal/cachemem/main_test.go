package cachemem

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// TestLastAppliedHeap reports the live heap of 10,000 kubectl-applied AgentSessions as the
// cache holds them with managedFields stripped, with and without last-applied-configuration
// (the figure behind cmd/manager's stripForCache). Run with -v.
func TestLastAppliedHeap(t *testing.T) {
	const n = 10000
	objs := make([]*v1alpha1.AgentSession, n)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var used [2]uint64
	for k, strip := range []bool{false, true} {
		base := heap()
		for i := range objs {
			s := &v1alpha1.AgentSession{
				TypeMeta:   metav1.TypeMeta{APIVersion: "agents.harness.dev/v1alpha1", Kind: "AgentSession"},
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("session-%05d", i), Namespace: "team-a", Labels: map[string]string{"app": "agent"}},
				Spec:       v1alpha1.AgentSessionSpec{SessionID: fmt.Sprintf("team-a-session-%05d", i)},
			}
			applied, _ := json.Marshal(s)
			s.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: string(applied) + "\n"}
			s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate}}
			raw, _ := json.Marshal(s)
			var got v1alpha1.AgentSession // decoded fresh, as the informer does
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			var out any = &got
			var err error
			out, err = cache.TransformStripManagedFields()(out)
			if err != nil {
				t.Fatal(err)
			}
			if strip {
				o := out.(*v1alpha1.AgentSession)
				delete(o.Annotations, corev1.LastAppliedConfigAnnotation)
			}
			objs[i] = out.(*v1alpha1.AgentSession)
		}
		used[k] = heap() - base
		t.Logf("last-applied stripped=%v: %.2f MiB live heap for %d sessions (%d B each)", strip, float64(used[k])/(1<<20), n, used[k]/n)
		clear(objs)
	}
	if used[1] >= used[0] {
		t.Fatalf("stripping last-applied-configuration saved nothing: %d B vs %d B", used[1], used[0])
	}
}
