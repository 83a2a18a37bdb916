package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crrecorder "sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/internal/eventsink"
)

// The Event writers the events phase can measure (-event-writers).
const (
	// writerRecorder is controller-runtime's manager recorder: client-go's events.k8s.io
	// broadcaster, what cmd/manager runs.
	writerRecorder = "recorder"
	// writerSink is internal/eventsink.
	writerSink = "sink"
)

// eventRounds are what the phase records, each for every session at once: the Event a
// committed transition records, its first repeat (the broadcaster turns it into a series:
// one write), and a second repeat (counted in memory until the series is refreshed or ends).
var eventRounds = []string{"first", "first repeat", "second repeat"}

// eventsResult is one Event writer with n sessions.
type eventsResult struct {
	writer string
	n      int
	rounds []eventRound
	// retained is the live heap, after a collection once the last round's writes stood still,
	// over the heap once the writer was made: what the writer keeps of the n Events.
	retained int64
}

type eventRound struct {
	wall    time.Duration // from the first Event recorded until the API server's Event writes stood still
	writes  float64       // Event writes the API server served
	refused float64       // Event writes it refused with 429 (sent again by the writer)
	// peakGoroutines and peakStack are the most goroutines and goroutine stack memory seen
	// (every 10 ms) above what the process had once the writer was made.
	peakGoroutines int
	peakStack      int64
}

// events measures an Event writer in this process at n sessions: each round records one
// Event regarding each of n sessions at once, as a storm of n committed toggles records them
// (regarding the session without its resourceVersion, so that repeats join a series), with
// the manager processes' identity and client settings.
func (b *bench) events(ctx context.Context, writer string, n int) (*eventsResult, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1 // as ctrl.GetConfig sets it: no client-side rate limit, API Priority and Fairness decides
	ns := fmt.Sprintf("events-%s", writer)
	admin, err := client.New(b.cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	refs := make([]corev1.ObjectReference, n)
	for i := range refs {
		refs[i] = corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentSession",
			Namespace: ns, Name: fmt.Sprintf("session-%05d", i), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	rec, done, err := startEventWriter(wctx, writer, cfg)
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second) // the writer's own start-up goroutines settle
	baseHeap, base := liveHeap(), processNow()
	r := &eventsResult{writer: writer, n: n}
	for _, round := range eventRounds {
		logPhase("events: %s, %d sessions, %s", writer, n, round)
		s0, err := apiWritesPatiently(ctx, b.cfg)
		if err != nil {
			return nil, err
		}
		peak := sampleProcess(base)
		start := time.Now()
		for i := range refs {
			rec.Eventf(&refs[i], nil, corev1.EventTypeNormal, controllers.EventReasonCommitted, "EnterPlanMode", "%s", "plan mode on committed to the session log")
		}
		last, err := b.eventWritesSettle(ctx)
		if err != nil {
			return nil, err
		}
		s1, err := apiWritesPatiently(ctx, b.cfg)
		if err != nil {
			return nil, err
		}
		g, h := peak()
		r.rounds = append(r.rounds, eventRound{wall: last.Sub(start), writes: s1["events"] - s0["events"], refused: s1["events 429"] - s0["events 429"],
			peakGoroutines: g, peakStack: h})
	}
	r.retained = liveHeap() - baseHeap
	runtime.KeepAlive(rec)
	stop()
	done()
	return r, nil
}

// startEventWriter makes and starts writer; done waits for it to stop once ctx ends.
func startEventWriter(ctx context.Context, writer string, cfg *rest.Config) (crrecorder.EventRecorder, func(), error) {
	switch writer {
	case writerRecorder:
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Logger: logr.Discard()})
		if err != nil {
			return nil, nil, err
		}
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = mgr.Start(ctx) }()
		return mgr.GetEventRecorder(controllers.FieldManager), func() { <-stopped }, nil
	case writerSink:
		cl, err := eventsv1client.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		hostname, _ := os.Hostname()
		sink := eventsink.New(cl, scheme, controllers.FieldManager, controllers.FieldManager+"-"+hostname, logr.Discard(), eventsink.Options{})
		stopped := make(chan struct{})
		go func() { defer close(stopped); sink.Run(ctx) }()
		return sink, func() { <-stopped }, nil
	}
	return nil, nil, fmt.Errorf("-event-writers: unknown writer %q; use %s or %s", writer, writerRecorder, writerSink)
}

// eventWritesSettle waits until the API server's count of Event writes (429s included) has stood
// still for 15 s, longer than client-go's broadcaster sleeps between the tries of a refused
// write (10 s, jittered by up to a quarter), at most 5 minutes; it returns when it last moved.
func (b *bench) eventWritesSettle(ctx context.Context) (time.Time, error) {
	count := func() (float64, error) {
		m, err := apiWritesPatiently(ctx, b.cfg)
		return m["events"] + m["events 429"], err
	}
	last, err := count()
	if err != nil {
		return time.Time{}, err
	}
	moved := time.Now()
	deadline := moved.Add(5 * time.Minute)
	for time.Since(moved) < 15*time.Second {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("the Event writes did not settle within 5 minutes")
		}
		time.Sleep(250 * time.Millisecond)
		c, err := count()
		if err != nil {
			return time.Time{}, err
		}
		if c != last {
			last, moved = c, time.Now()
		}
	}
	return moved, nil
}

// processSample is this process's goroutines and the memory their stacks hold.
type processSample struct {
	goroutines int
	stack      int64
}

func processNow() processSample {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return processSample{goroutines: runtime.NumGoroutine(), stack: int64(m.StackInuse)}
}

// apiWritesPatiently is apiWrites, tried again for up to a minute: with tens of thousands of
// Event writes in flight the API server can be too busy to complete a TLS handshake in time.
func apiWritesPatiently(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := apiWrites(ctx, cfg)
		if err == nil || time.Now().After(deadline) {
			return m, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// sampleProcess samples this process every 10 ms until the returned function is called, which
// returns the most goroutines and stack memory seen above base.
func sampleProcess(base processSample) func() (int, int64) {
	var mu sync.Mutex
	var peakG int
	var peakS int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			s := processNow()
			mu.Lock()
			peakG, peakS = max(peakG, s.goroutines-base.goroutines), max(peakS, s.stack-base.stack)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() (int, int64) {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peakG, peakS
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
