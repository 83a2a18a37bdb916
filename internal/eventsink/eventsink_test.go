package eventsink

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/harness-dev/planmode-operator/test/framework"
)

func TestEventSink(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "eventsink envtest suite")
}

var (
	testEnv *envtest.Environment
	cfg     *rest.Config
	kube    kubernetes.Interface
)

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	testEnv, cfg, err = framework.Start(framework.Options{NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	kube, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// gate stands between a Sink and the API server: it counts the Event writes in flight, can hold
// them until released, and can answer chosen writes itself with an error status.
type gate struct {
	next http.RoundTripper

	mu            sync.Mutex
	inFlight, max int
	writes        int
	held          chan struct{} // when set, writes wait until it is closed
	answer        func(n int) int
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.URL.Path, "/apis/events.k8s.io/") || req.Method == http.MethodGet {
		return g.next.RoundTrip(req)
	}
	g.mu.Lock()
	g.writes++
	n, held, answer := g.writes, g.held, g.answer
	g.inFlight++
	g.max = max(g.max, g.inFlight)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.inFlight--; g.mu.Unlock() }()
	if held != nil {
		select {
		case <-held:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if answer != nil {
		if code := answer(n); code != 0 {
			body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d,"reason":%q,"message":"answered by the test"}`,
				code, metav1.StatusReasonUnknown)
			return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		}
	}
	return g.next.RoundTrip(req)
}

func (g *gate) stats() (inFlight, most, writes int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.max, g.writes
}

// newSink returns a running Sink whose writes pass through g, and a func that stops it and
// waits for Run to return.
func newSink(g *gate, opts Options) (*Sink, func()) {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { g.next = rt; return g })
	kc, err := kubernetes.NewForConfig(c)
	Expect(err).NotTo(HaveOccurred())
	s := New(kc.EventsV1(), clientgoscheme.Scheme, "planmode-manager", "planmode-manager-test", logf.Log, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	stop := func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(BeClosed())
	}
	DeferCleanup(stop)
	return s, stop
}

var objects int

// object returns a ConfigMap, never created, for Events to regard.
func object() *corev1.ConfigMap {
	objects++
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default",
		Name: fmt.Sprintf("session-%d", objects), UID: types.UID(fmt.Sprintf("uid-%d", objects))}}
}

// eventsFor lists the Events regarding obj.
func eventsFor(obj *corev1.ConfigMap) func() []eventsv1.Event {
	return func() []eventsv1.Event {
		l, err := kube.EventsV1().Events("default").List(context.Background(),
			metav1.ListOptions{FieldSelector: "regarding.name=" + obj.Name})
		Expect(err).NotTo(HaveOccurred())
		return l.Items
	}
}

func dropped(s *Sink, reason string) float64 {
	return testutil.ToFloat64(s.dropped.WithLabelValues(reason))
}

const wait = 20 * time.Second

var _ = Describe("Sink", func() {
	It("writes an Event as client-go's recorder names it", func() {
		s, _ := newSink(&gate{}, Options{})
		obj := object()
		s.Eventf(obj, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "plan mode %s committed", "on")
		Eventually(eventsFor(obj)).WithTimeout(wait).Should(HaveLen(1))
		ev := eventsFor(obj)()[0]
		Expect(ev.Name).To(HavePrefix(obj.Name + "."))
		Expect(ev.ReportingController).To(Equal("planmode-manager"))
		Expect(ev.ReportingInstance).To(Equal("planmode-manager-test"))
		Expect(ev.Regarding.UID).To(Equal(obj.UID))
		Expect(ev.Regarding.Kind).To(Equal("ConfigMap"))
		Expect([]string{ev.Type, ev.Reason, ev.Action, ev.Note}).To(Equal([]string{"Normal", "Committed", "EnterPlanMode", "plan mode on committed"}))
		Expect(ev.EventTime.IsZero()).To(BeFalse())
		Expect(ev.Series).To(BeNil())
		Expect(testutil.ToFloat64(s.written)).To(BeEquivalentTo(1), "planmode_events_written_total")
	})

	It("holds Event writes while HoldWhile says the manager is behind, each at most HoldFor", func() {
		g := &gate{}
		var behind sync.Mutex
		busy := true
		s, _ := newSink(g, Options{HoldWhile: func() bool { behind.Lock(); defer behind.Unlock(); return busy }, HoldFor: 3 * time.Second})
		first := object()
		s.Eventf(first, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		Consistently(func() int { _, _, n := g.stats(); return n }).WithTimeout(time.Second).Should(BeZero(), "held while behind")
		Eventually(eventsFor(first)).WithTimeout(wait).Should(HaveLen(1), "written once HoldFor has passed, still behind")

		second := object()
		s.Eventf(second, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		Consistently(eventsFor(second)).WithTimeout(time.Second).Should(BeEmpty())
		behind.Lock()
		busy = false
		behind.Unlock()
		Eventually(eventsFor(second)).WithTimeout(2*time.Second).Should(HaveLen(1), "written as soon as the manager is not behind")
	})

	It("holds every Event for Settle, so that one recorded before a storm is seen waits behind it", func() {
		g := &gate{}
		var behind sync.Mutex
		busy := false
		isBusy := func() bool { behind.Lock(); defer behind.Unlock(); return busy }
		setBusy := func(b bool) { behind.Lock(); busy = b; behind.Unlock() }
		s, _ := newSink(g, Options{HoldWhile: isBusy, Settle: 2 * time.Second})
		writes := func() int { _, _, n := g.stats(); return n }

		calm := object()
		recorded := time.Now()
		s.Eventf(calm, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		Eventually(eventsFor(calm)).WithTimeout(wait).Should(HaveLen(1), "written once settled, the manager not behind")
		Expect(time.Since(recorded)).To(BeNumerically(">=", 2*time.Second), "not before Settle")

		first := object()
		s.Eventf(first, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		setBusy(true) // the storm the Event was the first of is seen while it settles
		n := writes()
		Consistently(writes).WithTimeout(3*time.Second).Should(Equal(n), "held past Settle while behind")
		setBusy(false)
		Eventually(eventsFor(first)).WithTimeout(wait).Should(HaveLen(1), "written once the manager is not behind")
	})

	It("joins repeats into a series: count 2 at once, later counts when the series ends, then forgets it", func() {
		g := &gate{}
		s, _ := newSink(g, Options{FinishAfter: 2 * time.Second})
		obj := object()
		queued := func() { s.Eventf(obj, nil, corev1.EventTypeNormal, "Queued", "EnterPlanMode", "queued") }
		queued()
		s.Eventf(obj, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		Eventually(eventsFor(obj)).WithTimeout(wait).Should(HaveLen(2))
		// Written once and not repeated, each is kept as its key's hash and time only.
		Eventually(func() []int { s.mu.Lock(); defer s.mu.Unlock(); return []int{len(s.entries), len(s.onces)} }).
			WithTimeout(wait).Should(Equal([]int{0, 2}))
		count := func() int32 {
			for _, ev := range eventsFor(obj)() {
				if ev.Reason == "Queued" && ev.Series != nil {
					return ev.Series.Count
				}
			}
			return 0
		}
		Expect(count()).To(BeZero())

		// The second occurrence is written at once; the third, recorded while that write is in
		// flight, waits for the series to end.
		g.mu.Lock()
		g.held = make(chan struct{})
		g.mu.Unlock()
		queued()
		Eventually(func() int { n, _, _ := g.stats(); return n }).WithTimeout(wait).Should(Equal(1))
		queued()
		close(g.held)
		Eventually(count).WithTimeout(wait).Should(Equal(int32(2)))
		Eventually(count).WithTimeout(wait).Should(Equal(int32(3)))
		Eventually(func() []int { s.mu.Lock(); defer s.mu.Unlock(); return []int{len(s.entries), len(s.onces)} }).
			WithTimeout(wait).Should(Equal([]int{0, 0}), "both forgotten once their series ended")
		Expect(eventsFor(obj)()).To(HaveLen(2), "a series is one Event")
	})

	It("names the related object, and does not join Events about different related objects", func() {
		s, _ := newSink(&gate{}, Options{})
		obj, a, b := object(), object(), object()
		for _, rel := range []*corev1.ConfigMap{a, a, b} {
			s.Eventf(obj, rel, corev1.EventTypeNormal, "ForkSeeded", "Fork", "seeded")
		}
		Eventually(eventsFor(obj)).WithTimeout(wait).Should(HaveLen(2))
		series := func() map[string]int32 {
			out := map[string]int32{}
			for _, ev := range eventsFor(obj)() {
				Expect(ev.Related).NotTo(BeNil())
				out[ev.Related.Name] = 1
				if ev.Series != nil {
					out[ev.Related.Name] = ev.Series.Count
				}
			}
			return out
		}
		Eventually(series).WithTimeout(wait).Should(Equal(map[string]int32{a.Name: 2, b.Name: 1}))
	})

	It("keeps at most Writers writes in flight, and writes every Event", func() {
		g := &gate{held: make(chan struct{})}
		s, _ := newSink(g, Options{Writers: 3})
		objs := make([]*corev1.ConfigMap, 40)
		for i := range objs {
			objs[i] = object()
			s.Eventf(objs[i], nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		}
		Eventually(func() int { n, _, _ := g.stats(); return n }).WithTimeout(wait).Should(Equal(3))
		Consistently(func() int { n, _, _ := g.stats(); return n }).WithTimeout(300 * time.Millisecond).Should(Equal(3))
		Expect(s.Queued()).To(Equal(40))
		close(g.held)
		for _, obj := range objs {
			Eventually(eventsFor(obj)).WithTimeout(wait).Should(HaveLen(1))
		}
		_, most, _ := g.stats()
		Expect(most).To(Equal(3))
		Eventually(s.Queued).WithTimeout(wait).Should(BeZero())
	})

	It("drops and counts what finds the queue full, and only that", func() {
		g := &gate{held: make(chan struct{})}
		s, _ := newSink(g, Options{Writers: 1, MaxQueued: 5})
		first := object()
		s.Eventf(first, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		Eventually(func() int { n, _, _ := g.stats(); return n }).WithTimeout(wait).Should(Equal(1))
		for range 9 {
			s.Eventf(object(), nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		}
		Expect(dropped(s, DropQueueFull)).To(Equal(4.0))
		close(g.held)
		Eventually(s.Queued).WithTimeout(wait).Should(BeZero())
		_, _, writes := g.stats()
		Expect(writes).To(Equal(6))
	})

	It("retries a write the API server refused for now (503), and drops one it refused for good (403) after one try", func() {
		g := &gate{answer: func(n int) int {
			if n <= 2 {
				return http.StatusServiceUnavailable
			}
			return 0
		}}
		s, _ := newSink(g, Options{})
		obj := object()
		s.Eventf(obj, nil, corev1.EventTypeWarning, "AppendFailed", "Append", "store down")
		Eventually(eventsFor(obj)).WithTimeout(wait).Should(HaveLen(1))
		_, _, writes := g.stats()
		Expect(writes).To(Equal(3))
		Expect(dropped(s, DropGaveUp) + dropped(s, DropRejected)).To(BeZero())

		g.mu.Lock()
		g.answer = func(int) int { return http.StatusForbidden }
		g.mu.Unlock()
		refused := object()
		s.Eventf(refused, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "committed")
		Eventually(func() float64 { return dropped(s, DropRejected) }).WithTimeout(wait).Should(Equal(1.0))
		_, _, writes = g.stats()
		Expect(writes).To(Equal(4))
		s.mu.Lock()
		Expect(s.entries).To(BeEmpty(), "the refused Event is forgotten, so a repeat is created afresh")
		Expect(s.onces).To(HaveLen(1), "the Event written is remembered")
		s.mu.Unlock()
	})

	It("forgets a series the API server refuses to update, instead of trying it again at every sweep", func() {
		g := &gate{}
		s, _ := newSink(g, Options{FinishAfter: 2 * time.Second})
		obj := object()
		s.Eventf(obj, nil, corev1.EventTypeNormal, "Queued", "EnterPlanMode", "queued")
		Eventually(eventsFor(obj)).WithTimeout(wait).Should(HaveLen(1))
		g.mu.Lock()
		g.answer = func(int) int { return http.StatusForbidden }
		g.mu.Unlock()
		s.Eventf(obj, nil, corev1.EventTypeNormal, "Queued", "EnterPlanMode", "queued")
		Eventually(func() float64 { return dropped(s, DropRejected) }).WithTimeout(wait).Should(Equal(1.0))
		_, _, writes := g.stats()
		// The series ends 2 s after its last repeat, and the sweep runs every second.
		Consistently(func() int { _, _, n := g.stats(); return n }).WithTimeout(4 * time.Second).Should(Equal(writes))
		s.mu.Lock()
		Expect(s.entries).To(BeEmpty())
		s.mu.Unlock()
	})

	It("writes what is queued when it stops", func() {
		g := &gate{held: make(chan struct{})}
		s, stop := newSink(g, Options{Writers: 1})
		objs := []*corev1.ConfigMap{object(), object(), object()}
		for _, obj := range objs {
			s.Eventf(obj, nil, corev1.EventTypeNormal, "Committed", "LeavePlanMode", "committed")
		}
		Eventually(func() int { n, _, _ := g.stats(); return n }).WithTimeout(wait).Should(Equal(1))
		stopped := make(chan struct{})
		go func() { defer GinkgoRecover(); stop(); close(stopped) }()
		Consistently(stopped).WithTimeout(300*time.Millisecond).ShouldNot(BeClosed(), "Run waits for the queued writes")
		close(g.held)
		Eventually(stopped).WithTimeout(wait).Should(BeClosed())
		for _, obj := range objs {
			Expect(eventsFor(obj)()).To(HaveLen(1))
		}
	})

	It("shortens a note past the API's 1 KiB limit instead of losing the Event", func() {
		s, _ := newSink(&gate{}, Options{})
		obj := object()
		s.Eventf(obj, nil, corev1.EventTypeWarning, "LogStoreUnavailable", "ReadLog", strings.Repeat("x", 3000))
		Eventually(eventsFor(obj)).WithTimeout(wait).Should(HaveLen(1))
		Expect(eventsFor(obj)()[0].Note).To(HaveLen(1024))
		Expect(eventsFor(obj)()[0].Note).To(HaveSuffix("..."))

		// At a character boundary: half of a two-byte character would go out as U+FFFD (three
		// bytes) and take the note past the limit.
		wide := object()
		s.Eventf(wide, nil, corev1.EventTypeWarning, "LogStoreUnavailable", "ReadLog", strings.Repeat("é", 1500))
		Eventually(eventsFor(wide)).WithTimeout(wait).Should(HaveLen(1))
		note := eventsFor(wide)()[0].Note
		Expect(utf8.ValidString(note)).To(BeTrue())
		Expect(note).To(Equal(strings.Repeat("é", 510) + "..."))
	})

	It("formats notes, and keeps a note passed on as (\"%s\", text) as the caller's text, not a copy", func() {
		g := &gate{held: make(chan struct{})}
		s, _ := newSink(g, Options{Writers: 1})
		formatted, passed := object(), object()
		text := strings.Repeat("plan mode on ", 2) // made at run time, as the reconciler's are
		s.Eventf(formatted, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "%d%% %s", 100, "done")
		s.Eventf(passed, nil, corev1.EventTypeNormal, "Committed", "EnterPlanMode", "%s", text)

		// While its write waits, the entry holds the caller's string: a storm's thousands of
		// queued Events share a few texts.
		s.mu.Lock()
		var kept []string
		for k, e := range s.entries {
			if k.regarding.UID == passed.UID {
				kept = append(kept, e.note)
			}
		}
		s.mu.Unlock()
		Expect(kept).To(HaveLen(1))
		Expect(unsafe.StringData(kept[0])).To(BeIdenticalTo(unsafe.StringData(text)))

		close(g.held)
		Eventually(eventsFor(formatted)).WithTimeout(wait).Should(HaveLen(1))
		Expect(eventsFor(formatted)()[0].Note).To(Equal("100% done"))
		Eventually(eventsFor(passed)).WithTimeout(wait).Should(HaveLen(1))
		Expect(eventsFor(passed)()[0].Note).To(Equal(text))
	})
})
