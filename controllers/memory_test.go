package controllers

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/eventqueue"
)

// BenchmarkHeldEventBytes reports what a transition Event costs while internal/eventqueue holds
// it (reconciles in flight, as all through a storm): 20,000 Events about 10,000 sessions, as a
// 10,000-session boundary storm records (with the reconciler's notes), with the reconciles'
// copies of the sessions dropped.
// go test ./controllers -run '^$' -bench Held
func BenchmarkHeldEventBytes(b *testing.B) {
	const sessions, perSession = 10000, 2
	var perEvent float64
	for b.Loop() {
		q := eventqueue.New(&events.FakeRecorder{}, func() bool { return true }, time.Hour)
		q.MaxQueued = sessions * perSession
		r := &AgentSessionReconciler{Recorder: q}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range sessions {
			s := benchSession(i)
			r.event(s, event{typ: corev1.EventTypeNormal, reason: EventReasonQueued, action: "EnterPlanMode",
				note: queuedNote.of(true), series: true})
			r.event(s, event{typ: corev1.EventTypeNormal, reason: EventReasonCommitted, action: "EnterPlanMode",
				note: committedNote.of(true), series: true})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEvent = float64(after.HeapAlloc-before.HeapAlloc) / float64(q.Queued())
		runtime.KeepAlive(q)
	}
	b.ReportMetric(perEvent, "B/event")
}

// benchSession is a reconcile's copy of a session in a boundary storm (strings of its own, as
// decoded from the API server).
func benchSession(i int) *agentsv1alpha1.AgentSession {
	return &agentsv1alpha1.AgentSession{
		TypeMeta: metav1.TypeMeta{APIVersion: agentsv1alpha1.GroupVersion.String(), Kind: agentSessionKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("session-%05d", i),
			UID:             types.UID(fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)),
			ResourceVersion: fmt.Sprint(100000 + i), Generation: 3},
		Spec: agentsv1alpha1.AgentSessionSpec{SessionID: fmt.Sprintf("sess-%05d", i),
			PlanMode: agentsv1alpha1.PlanModeSpec{Active: ptr.To(true)}},
		Status: agentsv1alpha1.AgentSessionStatus{ObservedGeneration: 3,
			PlanMode: agentsv1alpha1.PlanModeStatus{Active: false, Pending: true, PendingActive: ptr.To(true),
				Selection: ptr.To(true), NextSeq: 12, TurnOpen: true, ToldActive: ptr.To(false)},
			Conditions: []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
				Reason: "InSync", Message: "plan mode off is committed in the session log", ObservedGeneration: 3}}},
	}
}
