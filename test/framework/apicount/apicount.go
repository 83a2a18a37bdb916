// Package apicount counts the API requests a client makes, with a wrapping http.RoundTripper
// on its rest.Config: tests and the benchmarks use it to prove "no API write when nothing is
// pending" and to report writes per toggle. Event writes are writes like any other: they are in
// Writes, and EventWrites tells them apart.
package apicount

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Counter counts requests by kind. Safe for concurrent use.
type Counter struct {
	// Trace, when set before use, sees every write for diagnosis: method, path, body, the
	// response status (0 on a transport error), and when it was sent and answered.
	Trace func(method, path string, body []byte, status int, sent, answered time.Time)

	mu        sync.Mutex
	writes    int64
	reads     int64
	conflicts int64
	refused   int64
	unsent    int64
	byKey     map[string]int64
}

// New returns an empty Counter.
func New() *Counter { return &Counter{byKey: map[string]int64{}} }

// Wrap returns a copy of cfg whose requests are counted.
func (c *Counter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripper{c: c, next: rt}
	}
	return out
}

type roundTripper struct {
	c    *Counter
	next http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	r.c.record(req)
	if !IsWrite(req.Method) {
		return r.next.RoundTrip(req)
	}
	var body []byte
	if r.c.Trace != nil && req.GetBody != nil {
		if rc, err := req.GetBody(); err == nil {
			body, _ = io.ReadAll(rc)
			_ = rc.Close()
		}
	}
	// A write that failed before the whole request went out (a dial error, a TLS handshake
	// timeout, a connection lost while the request waited for a stream) never reached the
	// server; only one that went out and lost its answer may have been served.
	var wrote atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	}))
	sent := time.Now()
	resp, err := r.next.RoundTrip(req)
	if r.c.Trace != nil {
		status := 0
		if err == nil {
			status = resp.StatusCode
		}
		r.c.Trace(req.Method, req.URL.Path, body, status, sent, time.Now())
	}
	switch {
	case err != nil:
		if !wrote.Load() {
			r.c.unrecord(req, &r.c.unsent)
		}
	case resp.StatusCode == http.StatusConflict:
		r.c.mu.Lock()
		r.c.conflicts++
		r.c.mu.Unlock()
	case resp.StatusCode == http.StatusTooManyRequests:
		r.c.unrecord(req, &r.c.refused)
	}
	return resp, err
}

// Conflicts is the number of writes the server refused with 409 Conflict (an optimistic-lock
// miss); they are included in Writes.
func (c *Counter) Conflicts() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conflicts
}

// IsWrite reports whether the method changes state on the server.
func IsWrite(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

func (c *Counter) record(req *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !IsWrite(req.Method) {
		c.reads++
		return
	}
	c.writes++
	c.byKey[req.Method+" "+Resource(req.URL.Path)]++
}

// unrecord moves a write from the writes to the count at into (refused or unsent): one the
// server refused with 429 Too Many Requests (API Priority and Fairness, or max-in-flight) did no
// work there, and one that failed before it was sent never reached it; the client sends either
// again.
func (c *Counter) unrecord(req *http.Request, into *int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes--
	c.byKey[req.Method+" "+Resource(req.URL.Path)]--
	*into++
}

// Unsent is the number of writes that failed before the whole request was sent, so the server
// never saw them; they are not in Writes. A write sent whose answer was lost stays in Writes:
// the server may have served it.
func (c *Counter) Unsent() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unsent
}

// Refused is the number of writes the server refused with 429 Too Many Requests; they are not
// in Writes.
func (c *Counter) Refused() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

// EventsResource is what Resource makes of both Event APIs' paths, core (/api/v1) and
// events.k8s.io/v1 alike.
const EventsResource = "events"

// EventWrites is the number of Event writes (core and events.k8s.io) so far; they are included
// in Writes.
func (c *Counter) EventWrites() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, v := range c.byKey {
		if IsEventKey(k) {
			n += v
		}
	}
	return n
}

// IsEventKey reports whether a Breakdown key ("METHOD resource") is an Event write.
func IsEventKey(key string) bool {
	_, resource, _ := strings.Cut(key, " ")
	return resource == EventsResource
}

// Resource shortens an API path to its resource and subresource, for example
// "agentsessions/status" or "events", dropping namespace and name.
func Resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			switch len(rest) {
			case 1, 2:
				return rest[0]
			default:
				return rest[0] + "/" + strings.Join(rest[2:], "/")
			}
		}
	}
	if len(parts) > 0 {
		return parts[len(parts)-1]
	}
	return path
}

// Writes is the number of state-changing requests so far, but for those refused with 429
// (Refused).
func (c *Counter) Writes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// Reads is the number of GET requests so far (lists, watches and gets).
func (c *Counter) Reads() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// WritesTo is the number of writes whose method and resource match, for example
// WritesTo("PATCH", "agentsessions/status").
func (c *Counter) WritesTo(method, resource string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[method+" "+resource]
}

// Breakdown returns a copy of the write counts by "METHOD resource".
func (c *Counter) Breakdown() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.byKey))
	for k, v := range c.byKey {
		out[k] = v
	}
	return out
}
