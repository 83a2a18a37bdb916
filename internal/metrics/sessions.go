package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/sessioncache"
)

// SessionCollector reports gauges over every AgentSession the manager watches, read from its
// informer cache at scrape time (no API call, no state kept between scrapes).
type SessionCollector struct {
	reader  client.Reader
	timeout time.Duration

	sessions    *prometheus.Desc
	pending     *prometheus.Desc
	ready       *prometheus.Desc
	openReviews *prometheus.Desc
	reviewAge   *prometheus.Desc
	scrapeError *prometheus.Desc
	// now is the clock; nil means time.Now.
	now func() time.Time
}

// NewSessionCollector reads AgentSessions through reader (the manager's cache client).
func NewSessionCollector(reader client.Reader) *SessionCollector {
	return &SessionCollector{
		reader:  reader,
		timeout: 5 * time.Second,
		sessions: prometheus.NewDesc(Namespace+"_sessions",
			"AgentSessions by committed plan-mode state (status.planMode.active).", []string{"active"}, nil),
		pending: prometheus.NewDesc(Namespace+"_sessions_pending",
			"AgentSessions whose selection waits for a step boundary (status.planMode.pending).", nil, nil),
		ready: prometheus.NewDesc(Namespace+"_sessions_ready",
			"AgentSessions by Ready condition status and reason (InSync, SelectionPending, LogStoreUnavailable, ConfigMissing, InvalidBoundaryReport; none: not reconciled yet).",
			[]string{"status", "reason"}, nil),
		openReviews: prometheus.NewDesc(Namespace+"_reviews_pending",
			"Plan reviews waiting for a decision (status.review.phase Pending).", nil, nil),
		reviewAge: prometheus.NewDesc(Namespace+"_review_pending_oldest_seconds",
			"Age of the oldest plan review waiting for a decision in each namespace that has one, by the manager's clock (status.review.openedAt).",
			[]string{"namespace"}, nil),
		scrapeError: prometheus.NewDesc(Namespace+"_sessions_scrape_error",
			"1 when the last scrape could not list AgentSessions from the cache (the gauges above are then missing).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *SessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.pending
	ch <- c.ready
	ch <- c.openReviews
	ch <- c.reviewAge
	ch <- c.scrapeError
}

// Collect implements prometheus.Collector.
func (c *SessionCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	sessions, err := sessioncache.List(ctx, c.reader)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, 0)
	var on, off, pending, reviews float64
	type key struct{ status, reason string }
	ready := map[key]float64{}
	oldest := map[string]time.Time{}
	for _, s := range sessions {
		st := &s.Status
		if st.PlanMode.Active {
			on++
		} else {
			off++
		}
		if st.PlanMode.Pending {
			pending++
		}
		if st.Review != nil && st.Review.Phase == agentsv1alpha1.ReviewPending {
			reviews++
			if at := st.Review.OpenedAt; at != nil {
				ns := s.Namespace
				if o, ok := oldest[ns]; !ok || at.Time.Before(o) {
					oldest[ns] = at.Time
				}
			}
		}
		k := key{"Unknown", "none"}
		if cond := meta.FindStatusCondition(st.Conditions, agentsv1alpha1.ConditionReady); cond != nil {
			k = key{string(cond.Status), cond.Reason}
		}
		ready[k]++
	}
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, on, "true")
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, off, "false")
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, pending)
	ch <- prometheus.MustNewConstMetric(c.openReviews, prometheus.GaugeValue, reviews)
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	for ns, at := range oldest {
		ch <- prometheus.MustNewConstMetric(c.reviewAge, prometheus.GaugeValue, max(0, now().Sub(at).Seconds()), ns)
	}
	for k, n := range ready {
		ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, n, k.status, k.reason)
	}
}
