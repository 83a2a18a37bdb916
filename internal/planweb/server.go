package planweb

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

//go:embed assets/*.css assets/*.js templates/*.html
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"diffLines": diffLines,
	"age":       func(now, t time.Time) string { return duration.HumanDuration(now.Sub(t)) },
}).ParseFS(files, "templates/*.html"))

// Options configure Serve.
type Options struct {
	Backend Backend
	// Port is the port on 127.0.0.1 (0: a free one).
	Port int
	// Namespace and Name are the session whose review is served; with Name empty, the inbox.
	Namespace, Name string
	// Keep keeps serving after the review is decided.
	Keep bool
	// Open opens the URL in a browser; nil does not.
	Open func(url string) error
	// Out gets the URL line; ErrOut the warnings.
	Out, ErrOut io.Writer
}

// server is one running review server.
type server struct {
	o     Options
	g     guard
	base  string // origin + "/" + token + "/"
	ctx   context.Context
	hubs  sync.Map // "ns/name" -> *hub
	stop  func()
	done  <-chan struct{}
	start time.Time
}

// Serve listens on 127.0.0.1, prints the page's URL and serves until ctx ends or, for a
// review without Keep, the review is decided.
func Serve(ctx context.Context, o Options) error {
	if o.Backend == nil {
		return errors.New("planweb: no Backend")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("cannot listen on 127.0.0.1:%d (--port): %w", o.Port, err)
	}
	token, err := newToken()
	if err != nil {
		_ = ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	var once sync.Once
	s := &server{o: o, ctx: ctx, start: time.Now(), done: done, stop: func() { once.Do(func() { close(done) }) }}
	s.g = guard{token: token, origin: "http://" + ln.Addr().String()}
	s.base = s.g.origin + "/" + token + "/"
	page := s.base + "inbox"
	what := "the inbox"
	if o.Name != "" {
		page = s.reviewURL(o.Namespace, o.Name)
		what = "the review of " + o.Namespace + "/" + o.Name
	}
	stopsWhen := "Ctrl-C stops it"
	if o.Name != "" && !o.Keep {
		stopsWhen = "it stops once the review is decided, or on Ctrl-C"
	}
	fmt.Fprintf(o.Out, "Serving %s at %s\n(only on this machine, with your kubeconfig's credentials; %s)\n", what, page, stopsWhen)
	if o.Open != nil {
		if err := o.Open(page); err != nil {
			fmt.Fprintf(o.ErrOut, "warning: cannot open a browser (%v): open the URL above\n", err)
		}
	}
	if o.Name != "" && !o.Keep {
		// Stop once the review is decided, by anyone: the pages are told first (events).
		go s.stopWhenDecided(o.Namespace, o.Name)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("the review server stopped: %w", err)
	case <-ctx.Done():
		s.stop()
	case <-done:
	}
	// Let the last responses (a decision's reply, the events saying it was decided) finish.
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	return nil
}

func (s *server) reviewURL(ns, name string) string {
	return s.base + "review/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}

// ServeHTTP admits the request (guard) and routes it.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; "+
		"img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	// same-origin, not no-referrer: the token never leaves in a Referer, and a POST from our
	// page keeps its Origin (under no-referrer browsers send "Origin: null").
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	rest, err := s.g.admit(r)
	if err != nil {
		s.fail(w, http.StatusForbidden, err)
		return
	}
	parts := strings.Split(rest, "/")
	const review = "review"
	switch {
	case rest == "" || rest == "inbox":
		s.inbox(w, r)
	case len(parts) == 2 && parts[0] == "assets":
		s.asset(w, parts[1])
	case len(parts) == 3 && parts[0] == review && r.Method == http.MethodPost:
		s.fail(w, http.StatusMethodNotAllowed, errors.New("decisions are posted to .../decide"))
	case len(parts) == 3 && parts[0] == review:
		s.review(w, r, parts[1], parts[2])
	case len(parts) == 4 && parts[0] == review && parts[3] == "decide" && r.Method == http.MethodPost:
		s.decide(w, r, parts[1], parts[2])
	case len(parts) == 3 && parts[0] == "events":
		s.events(w, r, parts[1], parts[2])
	default:
		s.fail(w, http.StatusNotFound, fmt.Errorf("no page %q here", rest))
	}
}

func (s *server) asset(w http.ResponseWriter, name string) {
	data, err := files.ReadFile("assets/" + name)
	if err != nil {
		s.fail(w, http.StatusNotFound, fmt.Errorf("no asset %q", name))
		return
	}
	if strings.HasSuffix(name, ".css") {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	}
	_, _ = w.Write(data)
}

// view is what every template gets.
type view struct {
	Base      string
	Title     string
	InboxLink bool
	Error     string
	Review    *Review
	PlanHTML  template.HTML
	Events    string
	Inbox     *Inbox
	Now       time.Time
	Reply     string
	Back      string
	Stopping  bool
}

func (s *server) render(w http.ResponseWriter, status int, name string, v view) {
	v.Base = s.base
	v.InboxLink = s.o.Name == ""
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, v); err != nil {
		fmt.Fprintf(s.o.ErrOut, "warning: render %s: %v\n", name, err)
	}
}

func (s *server) fail(w http.ResponseWriter, status int, err error) {
	s.render(w, status, "error.html", view{Title: http.StatusText(status), Error: err.Error()})
}

func (s *server) review(w http.ResponseWriter, r *http.Request, ns, name string) {
	rv, err := s.o.Backend.Review(r.Context(), ns, name)
	if err != nil {
		s.fail(w, http.StatusOK, err)
		return
	}
	v := view{Title: "Plan review: " + ns + "/" + name, Review: rv}
	if rv.Nothing == "" {
		if v.PlanHTML, err = RenderPlan(rv.Plan); err != nil {
			s.fail(w, http.StatusOK, err)
			return
		}
		v.Title = rv.Title + " — plan review of " + ns + "/" + name
	}
	v.Events = s.base + "events/" + url.PathEscape(ns) + "/" + url.PathEscape(name) + "?shown=" + url.QueryEscape(rv.PlanSHA256)
	s.render(w, http.StatusOK, "review.html", v)
}

// maxForm bounds a decision's body: the feedback's limit (65,536 characters) in UTF-8, and
// the form's other fields.
const maxForm = 4*65536 + 4096

func (s *server) decide(w http.ResponseWriter, r *http.Request, ns, name string) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("cannot read the decision form: %w", err))
		return
	}
	d := Decision{Kind: r.PostForm.Get("decision"), PlanSHA256: r.PostForm.Get("planSHA256"), Feedback: strings.TrimSpace(r.PostForm.Get("feedback"))}
	switch {
	case d.Kind != Approve && d.Kind != KeepPlanning && d.Kind != Dismiss:
		s.fail(w, http.StatusBadRequest, fmt.Errorf("decision %q: want %s, %s or %s", d.Kind, Approve, KeepPlanning, Dismiss))
		return
	case d.PlanSHA256 == "":
		s.fail(w, http.StatusBadRequest, errors.New("planSHA256 is missing: a decision names the text it decides; reload the review"))
		return
	}
	v := view{Title: "Decision on " + ns + "/" + name, Back: s.reviewURL(ns, name)}
	reply, err := s.o.Backend.Decide(r.Context(), ns, name, d)
	if err != nil {
		v.Error = err.Error()
	}
	v.Reply = reply
	if err == nil && s.o.Name != "" && !s.o.Keep && ns == s.o.Namespace && name == s.o.Name {
		if rv, rerr := s.o.Backend.Review(r.Context(), ns, name); rerr == nil && (rv.Closed || rv.PlanSHA256 != d.PlanSHA256) {
			v.Stopping = true
			// After this response: Serve's Shutdown lets it finish.
			defer s.stop()
		}
	}
	s.render(w, http.StatusOK, "result.html", v)
}

func (s *server) inbox(w http.ResponseWriter, r *http.Request) {
	in, err := s.o.Backend.Inbox(r.Context())
	if err != nil {
		s.fail(w, http.StatusOK, err)
		return
	}
	s.render(w, http.StatusOK, "inbox.html", view{Title: "Plans awaiting review", Inbox: in, Now: time.Now()})
}

// diffLine is one line of a unified diff with its kind, for the rendered diff.
type diffLine struct {
	Kind, Text string
}

func diffLines(diff string) []diffLine {
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	out := make([]diffLine, 0, len(lines))
	for _, l := range lines {
		k := "same"
		switch {
		case strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---"):
			k = "file"
		case strings.HasPrefix(l, "@@"):
			k = "hunk"
		case strings.HasPrefix(l, "+"):
			k = "add"
		case strings.HasPrefix(l, "-"):
			k = "del"
		}
		out = append(out, diffLine{k, l})
	}
	return out
}
