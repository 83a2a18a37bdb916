package webhookdrain

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/harness-dev/planmode-operator/internal/freeport"
	"github.com/harness-dev/planmode-operator/webhooks"
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

	s.Drain(time.Hour)
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
}

// serve starts a real webhook server (TLS on a loopback port) wrapped for draining with one
// handler, and the manager's side of it: Start runs under managerCtx, its result on started.
func serve(managerCtx context.Context, t *testing.T) (s *Server, url string, c *http.Client, started chan error) {
	t.Helper()
	dir := t.TempDir()
	if _, err := webhooks.EnsureServingCert(dir, "tls.crt", "tls.key", []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	s = Wrap(webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}))
	s.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	ca, err := webhooks.ReadCABundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate in the serving directory")
	}
	c = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, Timeout: 5 * time.Second}
	started = make(chan error, 1)
	go func() { started <- s.Start(managerCtx) }()
	url = fmt.Sprintf("https://127.0.0.1:%d/validate", port)
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return s.StartedChecker()(nil) == nil, nil }); err != nil {
		t.Fatalf("the webhook server did not start: %v", err)
	}
	return s, url, c, started
}

// At a signal the manager's context ends at once and Start returns, so the manager stops and
// releases its lease without waiting; the server keeps serving, closing each connection, until
// the drain ends, and Wait returns only then.
func TestTheManagerStopsWhileTheServerDrains(t *testing.T) {
	managerCtx, stopManager := context.WithCancel(context.Background())
	s, url, c, started := serve(managerCtx, t)
	if closed, _ := get(t, c, url); closed {
		t.Fatal("a response before draining closes its connection")
	}

	const drain = 500 * time.Millisecond
	signalled := time.Now()
	s.Drain(drain)
	stopManager() // what SignalContext does at the signal, after Drain
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start returned %v at the manager's stop", err)
		}
	case <-time.After(drain / 2):
		t.Fatal("Start did not return when the manager's context ended: the manager would wait for the drain")
	}
	if closed, _ := get(t, c, url); !closed {
		t.Fatal("a request after the manager stopped, while draining, was not answered with Connection: close")
	}
	s.Wait()
	if waited := time.Since(signalled); waited < drain {
		t.Fatalf("Wait returned %s after the signal, before the %s drain ended", waited, drain)
	}
	if _, err := c.Post(url, "application/json", nil); err == nil {
		t.Fatal("the server still answers after Wait returned")
	}
}

// A manager that stops with no signal (an error, a lost lease) stops the server at once.
func TestWaitStopsTheServerWhenNotDraining(t *testing.T) {
	managerCtx, stopManager := context.WithCancel(context.Background())
	s, url, c, started := serve(managerCtx, t)
	get(t, c, url)
	stopManager()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not stop a server that was not draining")
	}
	if s.Draining() {
		t.Fatal("draining with no signal")
	}
	if _, err := c.Post(url, "application/json", nil); err == nil {
		t.Fatal("the server still answers after Wait returned")
	}
}

// Wait returns at once for a server the manager never started.
func TestWaitWithoutStart(t *testing.T) {
	s := Wrap(webhook.NewServer(webhook.Options{}))
	done := make(chan struct{})
	go func() { s.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait blocked on a server that was never started")
	}
}
