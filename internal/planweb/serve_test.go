package planweb

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// liveBackend is a review whose state the test changes; Watch reports each change.
type liveBackend struct {
	mu      sync.Mutex
	state   string
	closed  bool
	changes chan struct{}
}

func (b *liveBackend) Review(_ context.Context, ns, name string) (*Review, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &Review{Namespace: ns, Name: name, Title: "P", Plan: "# P\n", PlanSHA256: "d", Revision: 1,
		State: b.state, Approvals: "0 of 1 approvals", Open: !b.closed, Closed: b.closed}, nil
}

func (b *liveBackend) Inbox(context.Context) (*Inbox, error) { return &Inbox{}, nil }

func (b *liveBackend) Decide(context.Context, string, string, Decision) (string, error) {
	b.set("Approved by me", true)
	return "Approved", nil
}

func (b *liveBackend) set(state string, closed bool) {
	b.mu.Lock()
	b.state, b.closed = state, closed
	b.mu.Unlock()
	b.changes <- struct{}{}
}

func (b *liveBackend) Watch(ctx context.Context, _, _ string, changed func()) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.changes:
			changed()
		}
	}
}

// The server end to end, under the race detector: the URL line, the events a page gets, and
// the stop once a decision closes the review.
func TestServeLiveAndStop(t *testing.T) {
	b := &liveBackend{state: "Pending", changes: make(chan struct{}, 4)}
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), Options{Backend: b, Namespace: "ns", Name: "s", Out: w, ErrOut: io.Discard})
		_ = w.Close()
	}()
	lines := bufio.NewReader(out)
	first, err := lines.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, lines) }()
	m := regexp.MustCompile(`^Serving the review of ns/s at (http://127\.0\.0\.1:\d+/[0-9a-f]{64}/review/ns/s)\n$`).FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("URL line %q", first)
	}
	page := m[1]
	events := strings.Replace(page, "/review/", "/events/", 1) + "?shown=d"
	resp, err := http.Get(events)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("events Content-Type %q", ct)
	}
	stream := bufio.NewReader(resp.Body)
	next := func() string {
		t.Helper()
		for {
			l, err := stream.ReadString('\n')
			if err != nil {
				t.Fatalf("event stream: %v", err)
			}
			if strings.HasPrefix(l, "data: ") {
				return l
			}
		}
	}
	if got := next(); !strings.Contains(got, `"state":"Pending"`) {
		t.Fatalf("first event %s", got)
	}
	b.set("Pending, 1 of 2", false)
	if got := next(); !strings.Contains(got, `"state":"Pending, 1 of 2"`) {
		t.Fatalf("second event %s", got)
	}

	origin := page[:strings.Index(page[len("http://"):], "/")+len("http://")]
	req, _ := http.NewRequest(http.MethodPost, page+"/decide", strings.NewReader(url.Values{"decision": {Approve}, "planSHA256": {"d"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	dr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(dr.Body)
	_ = dr.Body.Close()
	if dr.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="stopped"`) {
		t.Fatalf("decision: %d %s", dr.StatusCode, body)
	}
	if got := next(); !strings.Contains(got, `"closed":true`) || !strings.Contains(got, "This review was decided: Approved by me") {
		t.Fatalf("closing event %s", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop after the review closed")
	}
}
