package apicount

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions/a/status": "agentsessions/status",
		"/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions/a":        "agentsessions",
		"/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions":          "agentsessions",
		"/apis/events.k8s.io/v1/namespaces/ns/events":                            "events",
		"/apis/events.k8s.io/v1/namespaces/ns/events/e1":                         "events",
		"/api/v1/namespaces/ns/events":                                           "events",
		"/api/v1/namespaces/ns/events/e1":                                        "events",
		"/api/v1/namespaces":                                                     "namespaces",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}

// A write refused with 429 did no work on the server: it is counted as refused, not as a write;
// a 409 did (the server read and compared the object) and stays a write.
func TestRefusedWritesAreNotWrites(t *testing.T) {
	codes := []int{http.StatusTooManyRequests, http.StatusConflict, http.StatusOK}
	var next atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			return
		}
		w.WriteHeader(codes[int(next.Add(1)-1)%len(codes)])
	}))
	defer srv.Close()
	c := New()
	hc, err := rest.HTTPClientFor(c.Wrap(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	const path = "/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions/a/status"
	for range codes {
		resp, err := hc.Do(must(http.NewRequest(http.MethodPatch, srv.URL+path, strings.NewReader("{}"))))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := hc.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c.Writes() != 2 || c.WritesTo("PATCH", "agentsessions/status") != 2 || c.Refused() != 1 || c.Conflicts() != 1 || c.Reads() != 1 {
		t.Fatalf("writes %d (to status %d), refused %d, conflicts %d, reads %d; want 2 (2), 1, 1, 1",
			c.Writes(), c.WritesTo("PATCH", "agentsessions/status"), c.Refused(), c.Conflicts(), c.Reads())
	}
}

// A write that failed before it was sent (here: nothing listens) never reached the server and
// is counted as unsent; one that was sent and lost its answer (the server read it and dropped
// the stream) may have been served and stays a write. Over HTTP/1.1 and HTTP/2, as client-go
// speaks both.
func TestUnsentWritesAreNotWrites(t *testing.T) {
	const path = "/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions/a"
	patch := func(t *testing.T, cfg *rest.Config, c *Counter) {
		t.Helper()
		hc, err := rest.HTTPClientFor(c.Wrap(cfg))
		if err != nil {
			t.Fatal(err)
		}
		if resp, err := hc.Do(must(http.NewRequest(http.MethodPatch, cfg.Host+path, strings.NewReader("{}")))); err == nil {
			resp.Body.Close()
			t.Fatalf("the PATCH was answered %d; want a transport error", resp.StatusCode)
		}
	}

	t.Run("not sent", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		c := New()
		patch(t, &rest.Config{Host: "http://" + addr}, c)
		if c.Writes() != 0 || c.WritesTo("PATCH", "agentsessions") != 0 || c.Unsent() != 1 {
			t.Fatalf("writes %d (to agentsessions %d), unsent %d; want 0 (0), 1",
				c.Writes(), c.WritesTo("PATCH", "agentsessions"), c.Unsent())
		}
	})

	// The handler reads the whole request, then drops it unanswered.
	var (
		served atomic.Int32
		proto  atomic.Value
	)
	drop := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		if _, err := io.Copy(io.Discard, r.Body); err == nil {
			served.Add(1)
		}
		panic(http.ErrAbortHandler)
	})
	for _, want := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run("sent, answer lost, "+want, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(drop)
			srv.EnableHTTP2 = want == "HTTP/2.0"
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			defer srv.Close()
			served.Store(0)
			c := New()
			patch(t, &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, c)
			if got := proto.Load(); got != want {
				t.Fatalf("the server saw %v; want %s", got, want)
			}
			if served.Load() != 1 || c.Writes() != 1 || c.Unsent() != 0 {
				t.Fatalf("served %d; writes %d, unsent %d; want 1; 1, 0", served.Load(), c.Writes(), c.Unsent())
			}
		})
	}
}

// Event writes count as writes, through either Event API, and EventWrites tells them apart; an
// Event read does not.
func TestEventWritesAreWrites(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	c := New()
	hc, err := rest.HTTPClientFor(c.Wrap(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []struct{ method, path string }{
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/ns/events"},
		{http.MethodPatch, "/apis/events.k8s.io/v1/namespaces/ns/events/e1"},
		{http.MethodPost, "/api/v1/namespaces/ns/events"},
		{http.MethodPut, "/api/v1/namespaces/ns/events/e2"},
		{http.MethodPatch, "/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions/a/status"},
		{http.MethodGet, "/apis/events.k8s.io/v1/namespaces/ns/events"},
	} {
		resp, err := hc.Do(must(http.NewRequest(req.method, srv.URL+req.path, strings.NewReader("{}"))))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if c.Writes() != 5 || c.EventWrites() != 4 || c.Reads() != 1 {
		t.Fatalf("writes %d, Event writes %d, reads %d; want 5, 4, 1", c.Writes(), c.EventWrites(), c.Reads())
	}
	if got := c.WritesTo("POST", EventsResource); got != 2 {
		t.Fatalf("POST events: %d, want 2 (core and events.k8s.io)", got)
	}
	for key, want := range map[string]bool{"POST events": true, "PATCH events": true, "PATCH agentsessions/status": false, "POST eventsfoo": false} {
		if IsEventKey(key) != want {
			t.Errorf("IsEventKey(%q) = %v, want %v", key, !want, want)
		}
	}
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}
