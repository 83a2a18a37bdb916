package webhookdrain

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// get sends one request and reports whether the response asked to close the connection and
// whether the request went on a reused connection.
func get(t *testing.T, c *http.Client, url string) (closed, reused bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	return resp.Close, reused
}

// The handlers registered through the wrapper keep connections open until draining starts,
// then close each one after its response, so a client's next request opens a new connection.
func TestDrainingClosesConnections(t *testing.T) {
	s := Wrap(webhook.NewServer(webhook.Options{}))
	s.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	ts := httptest.NewServer(s.WebhookMux())
	defer ts.Close()
	c := ts.Client()

	if closed, _ := get(t, c, ts.URL+"/validate"); closed {
		t.Fatal("a response before draining closes its connection")
	}
	if _, reused := get(t, c, ts.URL+"/validate"); !reused {
		t.Fatal("the second request before draining did not reuse the connection")
	}
	if s.Draining() {
		t.Fatal("draining before Drain")
	}

	stopped := make(chan time.Time, 1)
	start := time.Now()
	s.Drain(200*time.Millisecond, func() { stopped <- time.Now() })
	if !s.Draining() {
		t.Fatal("Drain did not start draining")
	}
	closed, reused := get(t, c, ts.URL+"/validate")
	if !closed || !reused {
		t.Fatalf("first request while draining: closed=%v reused=%v, want a reused connection closed after the response", closed, reused)
	}
	if _, reused := get(t, c, ts.URL+"/validate"); reused {
		t.Fatal("the request after a closing response went on the closed connection")
	}
	select {
	case at := <-stopped:
		if d := at.Sub(start); d < 200*time.Millisecond {
			t.Fatalf("stopped after %s, before the drain period", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the drain never stopped the manager")
	}
}

func TestNoDrainStopsAtOnce(t *testing.T) {
	s := Wrap(webhook.NewServer(webhook.Options{}))
	ctx, cancel := context.WithCancel(context.Background())
	s.Drain(0, cancel)
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Drain(0) did not stop at once")
	}
}
