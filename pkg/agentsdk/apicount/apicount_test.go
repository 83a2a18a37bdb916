package apicount

import (
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
		"/api/v1/namespaces": "namespaces",
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

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}
