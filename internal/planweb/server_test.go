package planweb

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// fakeBackend records decisions.
type fakeBackend struct {
	mu        sync.Mutex
	decisions []Decision
}

func (f *fakeBackend) Review(_ context.Context, ns, name string) (*Review, error) {
	return &Review{Namespace: ns, Name: name, Title: "Fix <b>it</b>", Plan: "# Fix <b>it</b>\n\n<script>x()</script>\n",
		Revision: 2, RevisionText: "2 (after revision 1)", ReviewID: "r2", PlanSHA256: "abc", Phase: "Pending",
		State: "Pending, awaiting a decision", Approvals: "0 of 1 approvals", Open: true, Diff: "--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new <i>\n"}, nil
}

func (f *fakeBackend) Inbox(context.Context) (*Inbox, error) {
	return &Inbox{Scope: "namespace ns"}, nil
}

func (f *fakeBackend) Decide(_ context.Context, _, _ string, d Decision) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decisions = append(f.decisions, d)
	return "Approved", nil
}

func (f *fakeBackend) Watch(ctx context.Context, _, _ string, _ func()) error {
	<-ctx.Done()
	return nil
}

func testServer(t *testing.T) (*server, *fakeBackend) {
	t.Helper()
	b := &fakeBackend{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan struct{})
	s := &server{o: Options{Backend: b, Keep: true, Out: io.Discard, ErrOut: io.Discard}, ctx: ctx, done: done, stop: func() {}}
	s.g = guard{token: "tok", origin: "http://127.0.0.1:4000"}
	s.base = s.g.origin + "/tok/"
	return s, b
}

func do(s *server, method, path, origin string, form url.Values) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://127.0.0.1:4000"+path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func TestReviewPageEscapesAndSanitizes(t *testing.T) {
	s, _ := testServer(t)
	w := do(s, "GET", "/tok/review/ns/s", "", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	page := w.Body.String()
	for _, want := range []string{`<h1 id="title">Fix &lt;b&gt;it&lt;/b&gt;</h1>`, `<span class="add">&#43;new &lt;i&gt;</span>`, `name="planSHA256" value="abc"`,
		`<meta name="viewport"`, `src="http://127.0.0.1:4000/tok/assets/live.js"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<script"); n != 1 {
		t.Errorf("%d <script> elements, want only the page's own live.js:\n%s", n, page)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if rp := w.Header().Get("Referrer-Policy"); rp != "same-origin" {
		t.Errorf("Referrer-Policy %q: the token must not leave in a Referer", rp)
	}
}

func TestForgedDecisionsAreRefused(t *testing.T) {
	s, b := testServer(t)
	form := url.Values{"decision": {Approve}, "planSHA256": {"abc"}}
	for _, tc := range []struct{ name, path, origin string }{
		{"no token", "/review/ns/s/decide", "http://127.0.0.1:4000"},
		{"wrong token", "/tox/review/ns/s/decide", "http://127.0.0.1:4000"},
		{"another origin", "/tok/review/ns/s/decide", "http://evil.example"},
		{"no origin", "/tok/review/ns/s/decide", ""},
	} {
		if w := do(s, "POST", tc.path, tc.origin, form); w.Code != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tc.name, w.Code)
		}
	}
	if w := do(s, "GET", "/tok/review/ns/s/decide?decision=approve&planSHA256=abc", "", nil); w.Code == http.StatusOK {
		t.Errorf("a GET decided: status %d", w.Code)
	}
	if len(b.decisions) != 0 {
		t.Fatalf("forged requests decided: %+v", b.decisions)
	}
	w := do(s, "POST", "/tok/review/ns/s/decide", "http://127.0.0.1:4000", url.Values{"decision": {KeepPlanning}, "planSHA256": {"abc"}, "feedback": {" more tests "}})
	if w.Code != http.StatusOK || len(b.decisions) != 1 || b.decisions[0] != (Decision{Kind: KeepPlanning, PlanSHA256: "abc", Feedback: "more tests"}) {
		t.Fatalf("status %d, decisions %+v", w.Code, b.decisions)
	}
	if w := do(s, "POST", "/tok/review/ns/s/decide", "http://127.0.0.1:4000", url.Values{"decision": {Approve}}); w.Code != http.StatusBadRequest {
		t.Errorf("a decision without planSHA256: status %d, want 400", w.Code)
	}
}

// What a page is told: a new plan makes it stale, a closed review is decided, a decision
// written but not applied yet is said as such.
func TestLiveMessages(t *testing.T) {
	open := liveState{PlanSHA256: "a", Revision: 1, State: "Pending, awaiting a decision", Open: true}
	if got := open.forPage("a"); got.Message != "" || got.Stale {
		t.Errorf("unchanged: %+v", got)
	}
	next := liveState{PlanSHA256: "b", Revision: 2, Open: true}
	if got := next.forPage("a"); !got.Stale || !strings.HasPrefix(got.Message, "The agent posted a new plan (revision 2)") {
		t.Errorf("new plan: %+v", got)
	}
	closed := liveState{PlanSHA256: "a", State: "Approved by rita", Closed: true}
	if got := closed.forPage("a"); got.Message != "This review was decided: Approved by rita" {
		t.Errorf("closed: %+v", got)
	}
	written := liveState{PlanSHA256: "a", State: "Pending; decision Approve written, waiting for the manager"}
	if got := written.forPage("a"); !strings.HasPrefix(got.Message, "A decision was written: ") {
		t.Errorf("written: %+v", got)
	}
	gone := liveState{}
	if got := gone.forPage("a"); !got.Stale || !strings.Contains(got.Message, "no longer under review") {
		t.Errorf("withdrawn: %+v", got)
	}
}
