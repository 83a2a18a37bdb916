// Package eventsink writes the manager's Events (events.k8s.io/v1) with a fixed number of
// writers and a compact series cache, in place of client-go's tools/events broadcaster.
//
// The broadcaster starts a goroutine per Event that holds its write in flight, and retries it
// however many are already waiting; and for series aggregation it keeps a full copy of every
// Event for minutes. In a storm the API server takes Events slower than they come, so the
// manager's memory grows with the storm; `make bench-scale` measures both writers side by side
// (its events phase, docs/performance.md#events). A Sink keeps the broadcaster's behaviour on
// the wire (the same Event names, series and retries) but writes with Options.Writers requests
// at most in flight, queues at most Options.MaxQueued Events, and keeps only a few fields of an
// Event in a series, and a hash of an Event written once, for aggregation.
package eventsink

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/harness-dev/planmode-operator/internal/metrics"
	"github.com/harness-dev/planmode-operator/pkg/apiretry"
)

// Options tune a Sink; zero fields take the defaults.
type Options struct {
	// Writers is the most Event writes in flight (default 4).
	Writers int
	// MaxQueued bounds the Events waiting for a writer (default 10,000). A new Event that finds
	// the queue full is dropped and counted (planmode_events_dropped_total{reason="queue_full"}),
	// as client-go's broadcaster drops past 1,000.
	MaxQueued int
	// RetryFor is how long a write refused for a reason that may pass (5xx, 429, a lost
	// connection) is retried, 1 s to 10 s apart (default 2 minutes, about client-go's 12 tries
	// 10 s apart).
	RetryFor time.Duration
	// FinishAfter: an Event not repeated for this long is forgotten, after its series' final
	// count is written (default 6 minutes, client-go's finishTime).
	FinishAfter time.Duration
	// RefreshEvery: a series still repeating has its count written this often (default 30
	// minutes, client-go's refreshTime), so it outlives the API server's Event TTL.
	RefreshEvery time.Duration
	// DrainFor bounds how long Run keeps writing queued Events once its context ends (default
	// 5 s); the writes then get one attempt each.
	DrainFor time.Duration
	// HoldWhile, when set, holds Event writes while it reports true (the manager is in a
	// storm), each for at most HoldFor (default DefaultHoldFor) after it was recorded,
	// so that Events do not compete with the status writes that answer agents and users.
	// It also holds every Event for Settle (default DefaultSettle) after it was recorded:
	// a storm is known only once its first changes have arrived, and its first Events would
	// otherwise go out among them.
	HoldWhile func() bool
	HoldFor   time.Duration
	Settle    time.Duration
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.Writers <= 0 {
		o.Writers = 4
	}
	if o.MaxQueued <= 0 {
		o.MaxQueued = 10000
	}
	def(&o.RetryFor, 2*time.Minute)
	def(&o.FinishAfter, 6*time.Minute)
	def(&o.RefreshEvery, 30*time.Minute)
	def(&o.DrainFor, 5*time.Second)
	def(&o.HoldFor, DefaultHoldFor)
	def(&o.Settle, DefaultSettle)
}

// DefaultHoldFor is the longest an Event is held while HoldWhile reports true, by default.
const DefaultHoldFor = time.Minute

// DefaultSettle is how long an Event is held after it was recorded when HoldWhile is set, by
// default: the storm rule's window (controllers/backlog.go), so that a storm is seen before
// any of its Events is written.
const DefaultSettle = time.Second

// holdPoll is how often a held writer looks again.
const holdPoll = 50 * time.Millisecond

// Reasons an Event is dropped (label "reason" of planmode_events_dropped_total).
const (
	DropQueueFull = "queue_full" // MaxQueued Events were already waiting
	DropRejected  = "rejected"   // the API server refused it for a reason a retry cannot fix
	DropGaveUp    = "gave_up"    // still refused after RetryFor, or the Sink stopped first
)

// maxNoteBytes is the events.k8s.io/v1 limit on note; a longer note would be refused whole.
const maxNoteBytes = 1024

// key is what makes two Events the same for aggregation: client-go's eventKey, less the
// reporting controller and instance, which are one per Sink. The related object, which
// plan mode's Events do not name, is its reference's fields joined ("" for none): a second
// ObjectReference would be a fifth of the key's size in every entry.
type key struct {
	regarding           corev1.ObjectReference
	related             string
	typ, reason, action string
}

func relatedKey(r *corev1.ObjectReference) string {
	return strings.Join([]string{r.APIVersion, r.Kind, r.Namespace, r.Name, string(r.UID), r.ResourceVersion, r.FieldPath}, "\x00")
}

// entry is what a Sink keeps of an Event being written or in a series: enough to write it and
// its series, not the Event. Times are Unix nanoseconds rather than time.Time (a third of its
// size). An Event written once and not repeated is kept among Sink.onces instead.
type entry struct {
	name        string
	note        string
	annotations map[string]string
	related     *corev1.ObjectReference
	// first and last occurrence, and when the API server last took it (Unix nanoseconds).
	first, last, writtenAt int64
	count                  int32 // occurrences
	written                int32 // count as the API server last took it (0: not yet created)
	queued                 bool  // a write of this entry is queued or in flight
}

// dueWrite: the Event is not created yet, or its series has begun and the API server does not
// know. Later repeats wait for the sweep (RefreshEvery, or the series' end), as in client-go.
func (e *entry) dueWrite() bool { return e.written == 0 || (e.count >= 2 && e.written < 2) }

type job struct {
	k key
	e *entry
	// queuedAt is when the write was queued (Unix nanoseconds).
	queuedAt int64
}

// keyHash stands for a key in Sink.onces: a 128-bit hash of its fields (a collision is as
// likely as guessing a random UUID).
type keyHash [2]uint64

func (k *key) hash(seeds *[2]maphash.Seed) keyHash {
	var out keyHash
	for i := range out {
		var h maphash.Hash
		h.SetSeed(seeds[i])
		r := &k.regarding
		for _, f := range []string{r.APIVersion, r.Kind, r.Namespace, r.Name, string(r.UID), r.ResourceVersion, r.FieldPath, k.related, k.typ, k.reason, k.action} {
			h.WriteString(f)
			h.WriteByte(0)
		}
		out[i] = h.Sum64()
	}
	return out
}

// Sink is a recorder.EventRecorder that writes events.k8s.io/v1 Events. Make it with New and run
// its writers with Run.
type Sink struct {
	events               eventsv1client.EventsGetter
	scheme               *runtime.Scheme
	controller, instance string
	opts                 Options
	log                  logr.Logger
	now                  func() time.Time

	dropped *prometheus.CounterVec
	written prometheus.Counter
	queued  prometheus.GaugeFunc

	mu       sync.Mutex
	work     *sync.Cond // a job was queued, or the Sink is draining
	queue    []job
	inflight int
	entries  map[key]*entry // Events being written, and series
	// onces are the Events written once and not repeated, with when they occurred (Unix
	// nanoseconds): enough to join a repeat within FinishAfter, since the Event's name is its
	// object's and that time. Most Events are never repeated, and a 10,000-session storm
	// leaves about 30,000 of them (BenchmarkSeriesCacheBytes).
	onces map[keyHash]int64
	seeds [2]maphash.Seed
	// the most entries and onces held since the maps were last made (see shrink)
	entriesPeak, oncesPeak int
	draining               bool
}

var _ recorder.EventRecorder = (*Sink)(nil)

// New returns a Sink that writes through events as reporting controller controller (instance
// controller-<hostname>, as client-go names it); scheme maps objects to references.
func New(events eventsv1client.EventsGetter, scheme *runtime.Scheme, controller, instance string, log logr.Logger, opts Options) *Sink {
	opts.defaults()
	s := &Sink{events: events, scheme: scheme, controller: controller, instance: instance, opts: opts,
		log: log, now: time.Now, entries: map[key]*entry{}, onces: map[keyHash]int64{},
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "events_dropped_total",
			Help: "Events the manager recorded but did not write, by reason (queue_full, rejected, gave_up).",
		}, []string{"reason"}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Name: "events_written_total",
			Help: "Event writes the API server took: new Events and the counts of their series.",
		}),
	}
	s.queued = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "events_queued",
		Help: "Event writes waiting for a writer or in flight.",
	}, func() float64 { return float64(s.Queued()) })
	for _, r := range []string{DropQueueFull, DropRejected, DropGaveUp} {
		s.dropped.WithLabelValues(r)
	}
	s.work = sync.NewCond(&s.mu)
	return s
}

// Collectors are the Sink's metrics, for a Prometheus registry.
func (s *Sink) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.dropped, s.written, s.queued}
}

// Queued is the number of Event writes waiting or in flight.
func (s *Sink) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) + s.inflight
}

// Eventf records an Event (see events.EventRecorder).
func (s *Sink) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	s.AnnotatedEventf(regarding, related, nil, eventtype, reason, action, note, args...)
}

// AnnotatedEventf records an Event with annotations (see events.AnnotatedEventRecorder). It
// never blocks on the API server.
func (s *Sink) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	note = format(note, args)
	ref, err := reference.GetReference(s.scheme, regarding)
	if err != nil {
		s.log.Error(err, "cannot name the Event's object; not recording it", "reason", reason)
		return
	}
	if !util.ValidateEventType(eventtype) {
		s.log.Error(nil, "unsupported Event type; not recording it", "type", eventtype, "reason", reason)
		return
	}
	k := key{regarding: *ref, typ: eventtype, reason: reason, action: action}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(s.scheme, related); err == nil {
			k.related = relatedKey(rel)
		} else {
			rel = nil
		}
	}
	now := s.now().UnixNano()

	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[k]; ok {
		e.count++
		e.last = now
		if !e.queued && e.dueWrite() {
			s.push(k, e)
		}
		return
	}
	h := k.hash(&s.seeds)
	if first, ok := s.onces[h]; ok {
		// The second occurrence: the series begins. The entry takes this occurrence's note,
		// related object and annotations, which share the first's key.
		delete(s.onces, h)
		e := &entry{name: util.GenerateEventName(ref.Name, first), first: first, last: now, writtenAt: first,
			related: rel, note: truncate(note), annotations: annotations, count: 2, written: 1}
		s.entries[k] = e
		s.entriesPeak = max(s.entriesPeak, len(s.entries))
		s.push(k, e)
		return
	}
	if len(s.queue) >= s.opts.MaxQueued {
		s.dropped.WithLabelValues(DropQueueFull).Inc()
		return
	}
	e := &entry{name: util.GenerateEventName(ref.Name, now), first: now, last: now,
		related: rel, note: truncate(note), annotations: annotations, count: 1}
	s.entries[k] = e
	s.entriesPeak = max(s.entriesPeak, len(s.entries))
	s.push(k, e)
}

// format is fmt.Sprintf, but a note passed on as ("%s", text), as recorders pass notes through,
// is the caller's text rather than a copy: a large storm leaves an entry per Event whose notes
// are a few texts made once (controllers); BenchmarkSeriesCacheBytes measures the difference.
func format(note string, args []any) string {
	if note == "%s" && len(args) == 1 {
		if text, ok := args[0].(string); ok {
			return text
		}
	}
	if len(args) == 0 {
		return note
	}
	return fmt.Sprintf(note, args...)
}

// truncate shortens a note to the API's limit at a character boundary: a split character would
// be sent as U+FFFD, longer than the byte it replaces.
func truncate(note string) string {
	if len(note) <= maxNoteBytes {
		return note
	}
	cut := maxNoteBytes - len("...")
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + "..."
}

// push queues a write of e; s.mu is held.
func (s *Sink) push(k key, e *entry) {
	e.queued = true
	s.queue = append(s.queue, job{k: k, e: e, queuedAt: s.now().UnixNano()})
	s.work.Signal()
}

// Run writes queued Events until ctx ends, then for at most DrainFor more; it returns once the
// writers have stopped. Run it once. The manager ends it after its runnables have stopped, so
// the Events they hand on as they stop are written too.
func (s *Sink) Run(ctx context.Context) {
	writeCtx, stopWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWrites()
	var wg sync.WaitGroup
	for range s.opts.Writers {
		wg.Go(func() { s.writer(writeCtx) })
	}
	sweep := time.NewTicker(min(time.Minute, s.opts.FinishAfter/2))
	defer sweep.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-sweep.C:
			s.sweep()
		}
	}
	s.mu.Lock()
	s.draining = true
	s.work.Broadcast()
	s.mu.Unlock()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(s.opts.DrainFor):
		stopWrites()
		<-drained
	}
}

// sweep queues the counts of series that ended or are due a refresh, and forgets Events that
// ended with nothing left to write.
func (s *Sink) sweep() {
	now := s.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.entries {
		if e.queued {
			continue
		}
		ended := time.Duration(now-e.last) >= s.opts.FinishAfter
		switch {
		case e.written < e.count && e.count >= 2 && (ended || time.Duration(now-e.writtenAt) >= s.opts.RefreshEvery):
			s.push(k, e)
		case ended:
			delete(s.entries, k)
		}
	}
	for h, first := range s.onces {
		if time.Duration(now-first) >= s.opts.FinishAfter {
			delete(s.onces, h)
		}
	}
	s.entries = shrink(s.entries, &s.entriesPeak)
	s.onces = shrink(s.onces, &s.oncesPeak)
}

// shrink copies m into a map of its size once it holds less than a quarter of its peak: a Go
// map keeps the memory of its largest size, and a storm's thousands of Events are forgotten
// within minutes.
func shrink[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if len(m) >= *peak/4 {
		return m
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	*peak = len(m)
	return out
}

func (s *Sink) writer(ctx context.Context) {
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.draining {
			s.work.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		if s.held(s.queue[0]) {
			s.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(holdPoll):
			}
			continue
		}
		j := s.queue[0]
		s.queue[0] = job{}
		s.queue = s.queue[1:]
		ev, count, created, retry := s.event(j), j.e.count, j.e.written > 0, !s.draining
		s.inflight++
		s.mu.Unlock()

		// Once the manager is stopping, each write gets one attempt.
		err := s.write(ctx, ev, created, retry)

		s.mu.Lock()
		s.inflight--
		j.e.queued = false
		if err == nil {
			s.written.Inc()
			s.wrote(j, count)
		} else {
			reason := DropGaveUp
			if !apiretry.Transient(err) && ctx.Err() == nil {
				reason = DropRejected
			}
			s.dropped.WithLabelValues(reason).Inc()
			s.log.V(1).Info("Event not written", "reason", reason, "event", ev.Namespace+"/"+ev.Name, "error", err.Error())
			// Forget it: a series the API server will not update would otherwise be queued
			// again at every sweep once it ends, and a repeat starts a new Event instead.
			delete(s.entries, j.k)
		}
		s.mu.Unlock()
	}
}

// held reports that the write of j waits (Options.HoldWhile); s.mu is held.
func (s *Sink) held(j job) bool {
	if s.opts.HoldWhile == nil || s.draining {
		return false
	}
	age := time.Duration(s.now().UnixNano() - j.queuedAt)
	return age < s.opts.Settle || age < s.opts.HoldFor && s.opts.HoldWhile()
}

// wrote records that the API server took j's Event at count; s.mu is held. An Event not
// repeated meanwhile is kept only among the onces.
func (s *Sink) wrote(j job, count int32) {
	j.e.written, j.e.writtenAt = max(j.e.written, count), s.now().UnixNano()
	switch {
	case j.e.count == 1:
		delete(s.entries, j.k)
		s.onces[j.k.hash(&s.seeds)] = j.e.first
		s.oncesPeak = max(s.oncesPeak, len(s.onces))
	case j.e.dueWrite() && !s.draining:
		s.push(j.k, j.e)
	}
}

// event builds the Event j stands for, as client-go's recorder would; s.mu is held.
func (s *Sink) event(j job) *eventsv1.Event {
	ns := j.k.regarding.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: j.e.name, Namespace: ns, Annotations: j.e.annotations},
		EventTime:           metav1.NewMicroTime(time.Unix(0, j.e.first)),
		ReportingController: s.controller,
		ReportingInstance:   s.instance,
		Action:              j.k.action,
		Reason:              j.k.reason,
		Regarding:           j.k.regarding,
		Related:             j.e.related,
		Note:                j.e.note,
		Type:                j.k.typ,
	}
	if j.e.count >= 2 {
		ev.Series = &eventsv1.EventSeries{Count: j.e.count, LastObservedTime: metav1.NewMicroTime(time.Unix(0, j.e.last))}
	}
	return ev
}

// write creates ev, or patches its series when the API server has it already; a series whose
// Event is gone (404) is created whole. With retry, a write refused for a reason that may pass
// is tried again for RetryFor.
func (s *Sink) write(ctx context.Context, ev *eventsv1.Event, created, retry bool) error {
	events := s.events.Events(ev.Namespace)
	patchSeries := func(ctx context.Context) error {
		patch, err := json.Marshal(map[string]any{"series": ev.Series})
		if err != nil {
			return err
		}
		_, err = events.Patch(ctx, ev.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	once := func(ctx context.Context) error {
		if ev.Series != nil && created {
			if err := patchSeries(ctx); !apierrors.IsNotFound(err) {
				return err
			}
		}
		_, err := events.Create(ctx, ev, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			if ev.Series == nil {
				return nil // an earlier attempt landed although its answer was lost
			}
			created = true // created meanwhile (the series began while it was written)
			err = patchSeries(ctx)
		}
		return err
	}
	var err error
	if retry {
		ctx, cancel := context.WithTimeout(ctx, s.opts.RetryFor)
		defer cancel()
		err = apiretry.Until(ctx, time.Second, 10*time.Second, func() error { return once(ctx) }, nil)
	} else {
		err = once(ctx)
	}
	if err != nil {
		return fmt.Errorf("write Event %s/%s: %w", ev.Namespace, ev.Name, err)
	}
	return nil
}
