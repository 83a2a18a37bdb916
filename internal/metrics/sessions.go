package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// SessionCollector reports gauges over every AgentSession the manager watches. It counts them
// from the changes its session watch delivers (EventHandler): each change moves the counts by
// what the old object and the new one contribute, so that a scrape costs the same at any number
// of sessions: walking the cache at every scrape was a visible share of the manager's start-up
// CPU when scraped often (docs/performance.md). It keeps no per-session state beyond the open
// reviews' times.
type SessionCollector struct {
	mu      sync.Mutex
	on, off int
	pending int
	reviews int
	ready   map[readyKey]int
	// waiting holds, by namespace and name, when each review still waiting was opened.
	waiting map[string]map[string]time.Time

	sessions    *prometheus.Desc
	pendingDesc *prometheus.Desc
	readyDesc   *prometheus.Desc
	openReviews *prometheus.Desc
	reviewAge   *prometheus.Desc
	// now is the clock; nil means time.Now.
	now func() time.Time
}

type readyKey struct{ status, reason string }

// NewSessionCollector returns the gauges, at zero until its EventHandler is watching.
func NewSessionCollector() *SessionCollector {
	return &SessionCollector{
		ready:   map[readyKey]int{},
		waiting: map[string]map[string]time.Time{},
		sessions: prometheus.NewDesc(Namespace+"_sessions",
			"AgentSessions by committed plan-mode state (status.planMode.active).", []string{"active"}, nil),
		pendingDesc: prometheus.NewDesc(Namespace+"_sessions_pending",
			"AgentSessions whose selection waits for a step boundary (status.planMode.pending).", nil, nil),
		readyDesc: prometheus.NewDesc(Namespace+"_sessions_ready",
			"AgentSessions by Ready condition status and reason (InSync, SelectionPending, LogStoreUnavailable, ConfigMissing, InvalidBoundaryReport; none: not reconciled yet).",
			[]string{"status", "reason"}, nil),
		openReviews: prometheus.NewDesc(Namespace+"_reviews_pending",
			"Plan reviews waiting for a decision (status.review.phase Pending).", nil, nil),
		reviewAge: prometheus.NewDesc(Namespace+"_review_pending_oldest_seconds",
			"Age of the oldest plan review waiting for a decision in each namespace that has one, by the manager's clock (status.review.openedAt).",
			[]string{"namespace"}, nil),
	}
}

// EventHandler counts the AgentSession changes of a watch and queues nothing: the reconciler's
// controller watches AgentSessions with it beside its own handler, on the same informer, so
// that the gauges add no informer and no wait of their own to the manager's start.
func (c *SessionCollector) EventHandler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			c.count(nil, asSession(e.Object))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			c.count(asSession(e.ObjectOld), asSession(e.ObjectNew))
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			c.count(asSession(e.Object), nil)
		},
	}
}

func asSession(o client.Object) *agentsv1alpha1.AgentSession {
	s, _ := o.(*agentsv1alpha1.AgentSession)
	return s
}

// count moves the gauges from what old contributed to what s does (either may be nil).
func (c *SessionCollector) count(old, s *agentsv1alpha1.AgentSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(old, -1)
	c.add(s, 1)
}

// add adds s's contribution to the gauges d times (-1 to take it away); c.mu is held.
func (c *SessionCollector) add(s *agentsv1alpha1.AgentSession, d int) {
	if s == nil {
		return
	}
	st := &s.Status
	if st.PlanMode.Active {
		c.on += d
	} else {
		c.off += d
	}
	if st.PlanMode.Pending {
		c.pending += d
	}
	k := readyKey{"Unknown", "none"}
	if cond := meta.FindStatusCondition(st.Conditions, agentsv1alpha1.ConditionReady); cond != nil {
		k = readyKey{string(cond.Status), cond.Reason}
	}
	if c.ready[k] += d; c.ready[k] == 0 {
		delete(c.ready, k)
	}
	if st.Review == nil || st.Review.Phase != agentsv1alpha1.ReviewPending {
		return
	}
	c.reviews += d
	if st.Review.OpenedAt == nil {
		return
	}
	byName := c.waiting[s.Namespace]
	if d < 0 {
		delete(byName, s.Name)
		if len(byName) == 0 {
			delete(c.waiting, s.Namespace)
		}
		return
	}
	if byName == nil {
		byName = map[string]time.Time{}
		c.waiting[s.Namespace] = byName
	}
	byName[s.Name] = st.Review.OpenedAt.Time
}

// Describe implements prometheus.Collector.
func (c *SessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.pendingDesc
	ch <- c.readyDesc
	ch <- c.openReviews
	ch <- c.reviewAge
}

// Collect implements prometheus.Collector.
func (c *SessionCollector) Collect(ch chan<- prometheus.Metric) {
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(c.on), "true")
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(c.off), "false")
	ch <- prometheus.MustNewConstMetric(c.pendingDesc, prometheus.GaugeValue, float64(c.pending))
	ch <- prometheus.MustNewConstMetric(c.openReviews, prometheus.GaugeValue, float64(c.reviews))
	for ns, byName := range c.waiting {
		var oldest time.Time
		for _, at := range byName {
			if oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
		ch <- prometheus.MustNewConstMetric(c.reviewAge, prometheus.GaugeValue, max(0, now().Sub(oldest).Seconds()), ns)
	}
	for k, n := range c.ready {
		ch <- prometheus.MustNewConstMetric(c.readyDesc, prometheus.GaugeValue, float64(n), k.status, k.reason)
	}
}
