package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// edgeProxy serves the API server on loopback HTTP to one agent (its only way to it) and times,
// at the agent's network edge, each boundary report and its answer: from the arrival of the
// agent's request that patches status.agent.boundary to the moment the proxy passes the agent
// the first event of its own watch whose status.planMode.lastBoundary answers the same
// (turn, step, seq). The two agents of the pending phase each get one, so the hop is the same.
type edgeProxy struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reports []*ackTiming
}

func newEdgeProxy(cfg *rest.Config) (*edgeProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	rp.FlushInterval = -1
	e := &edgeProxy{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Uncompressed answers, so the watch stream can be read on its way through.
		r.Header.Del("Accept-Encoding")
		if r.Method == http.MethodPatch && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			e.report(b, time.Now())
		}
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			w = &watchTimer{ResponseWriter: w, e: e}
		}
		rp.ServeHTTP(w, r)
	}))
	return e, nil
}

func (e *edgeProxy) Close() { e.srv.Close() }

// report records a boundary report in a patch body (a retry of the same report keeps the first
// arrival).
func (e *edgeProxy) report(body []byte, now time.Time) {
	var p struct {
		Status struct {
			Agent struct {
				Boundary *struct{ Turn, Step, Seq int64 } `json:"boundary"`
			} `json:"agent"`
		} `json:"status"`
	}
	if json.Unmarshal(body, &p) != nil || p.Status.Agent.Boundary == nil {
		return
	}
	b := p.Status.Agent.Boundary
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.reports {
		if r.turn == b.Turn && r.step == b.Step && r.seq == b.Seq {
			return
		}
	}
	e.reports = append(e.reports, &ackTiming{turn: b.Turn, step: b.Step, seq: b.Seq, reported: now})
}

// event looks at one watch event on its way to the agent.
func (e *edgeProxy) event(line []byte, now time.Time) {
	var ev struct {
		Object struct {
			Status struct {
				PlanMode struct {
					LastBoundary *struct{ Turn, Step, Seq int64 } `json:"lastBoundary"`
				} `json:"planMode"`
			} `json:"status"`
		} `json:"object"`
	}
	if json.Unmarshal(line, &ev) != nil || ev.Object.Status.PlanMode.LastBoundary == nil {
		return
	}
	lb := ev.Object.Status.PlanMode.LastBoundary
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.reports {
		if r.answered.IsZero() && r.turn == lb.Turn && r.step == lb.Step && r.seq == lb.Seq {
			r.answered = now
		}
	}
}

// timings is a copy of the reports so far.
func (e *edgeProxy) timings() []ackTiming {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]ackTiming, len(e.reports))
	for i, r := range e.reports {
		out[i] = *r
	}
	return out
}

// watchTimer passes a watch stream (JSON events, one a line) through, handing each complete
// event to the proxy just before the bytes that end it go to the agent.
type watchTimer struct {
	http.ResponseWriter
	e   *edgeProxy
	buf []byte
}

func (t *watchTimer) Write(p []byte) (int, error) {
	now := time.Now()
	t.buf = append(t.buf, p...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		t.e.event(t.buf[:i], now)
		t.buf = t.buf[i+1:]
	}
	return t.ResponseWriter.Write(p)
}

func (t *watchTimer) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (t *watchTimer) Unwrap() http.ResponseWriter { return t.ResponseWriter }
