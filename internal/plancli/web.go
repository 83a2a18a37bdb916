package plancli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/planweb"
	"github.com/harness-dev/planmode-operator/internal/termtext"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// kubectl plan review SESSION --web and kubectl plan inbox --web: the pages of internal/planweb,
// served with the user's own client. Every read and decision below is the command line's own
// code (review, inbox, decide), so the browser shows the same facts and the same refusals.

type webFlags struct {
	web, noOpen, keep bool
	port              int
}

const webHelp = `

--web serves the page on 127.0.0.1 (a free port, or --port) instead, prints its URL and opens it
in $BROWSER when that is set (--no-open: never). The server acts with your kubeconfig only, so
every decision is yours, checked by the API server and the webhooks as kubectl plan approve is.
A random token in the URL guards the pages; a decision is a POST from the page itself (its
Origin is checked). Ctrl-C stops the server.`

func addWebFlags(cmd *cobra.Command, f *webFlags, what string) {
	cmd.Flags().BoolVar(&f.web, "web", false, "Serve "+what+" in a browser on 127.0.0.1")
	cmd.Flags().IntVar(&f.port, "port", 0, "Port on 127.0.0.1 for --web (0: a free one)")
	cmd.Flags().BoolVar(&f.noOpen, "no-open", false, "With --web, print the URL without opening a browser")
}

// checkWebFlags refuses --port, --no-open and --keep without --web.
func checkWebFlags(cmd *cobra.Command, f webFlags) error {
	if f.web {
		if f.port < 0 || f.port > 65535 {
			return fmt.Errorf("--port %d: want a port from 1 to 65535, or 0 for a free one", f.port)
		}
		return nil
	}
	for _, n := range []string{"port", "no-open", "keep"} {
		if fl := cmd.Flags().Lookup(n); fl != nil && fl.Changed {
			return fmt.Errorf("--%s goes with --web (kubectl plan %s --web --%s ...)", n, cmd.Name(), n)
		}
	}
	return nil
}

// serveWeb runs the review server for session name (or the inbox, name empty) until it stops.
func (o *Options) serveWeb(ctx context.Context, f webFlags, name, store string, all bool) error {
	if err := o.complete(); err != nil {
		return err
	}
	b := &webBackend{o: o, store: store, all: all}
	opts := planweb.Options{Backend: b, Port: f.port, Keep: f.keep, Out: o.Streams.Out, ErrOut: o.Streams.ErrOut}
	if name != "" {
		// Read it once first: a session that does not exist fails here, with kubectl plan's words.
		if _, err := o.get(ctx, name); err != nil {
			return err
		}
		opts.Namespace, opts.Name = o.ns, name
	}
	if !f.noOpen {
		opts.Open = browserOpener(os.Getenv("BROWSER"))
	}
	return planweb.Serve(ctx, opts)
}

// browserOpener runs $BROWSER with the URL (the first of its colon-separated commands; %s, if
// any, is replaced by the URL), or nil when it is not set.
func browserOpener(browser string) func(string) error {
	first, _, _ := strings.Cut(browser, ":")
	fields := strings.Fields(first)
	if len(fields) == 0 {
		return nil
	}
	return func(url string) error {
		args := fields[1:]
		placed := false
		for i, a := range args {
			if strings.Contains(a, "%s") {
				args[i], placed = strings.ReplaceAll(a, "%s", url), true
			}
		}
		if !placed {
			args = append(args, url)
		}
		//nolint:gosec // the user's own $BROWSER, by design.
		cmd := exec.Command(fields[0], args...)
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }()
		return nil
	}
}

// webBackend implements planweb.Backend with the plugin's client and code.
type webBackend struct {
	o     *Options
	store string
	all   bool

	// diffs caches each plan's diff by session and digest: a live update reads the session
	// again at every change, and the previous text, read from the log store, does not change.
	mu    sync.Mutex
	diffs map[string][2]string
}

// diff is revisionDiff's diff of plan r and its note, from the cache when it was read before.
func (b *webBackend) diff(ctx context.Context, o *Options, as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) (diff, note string) {
	key := as.Namespace + "/" + as.Name + "/" + planmode.PlanSHA256(r.Plan)
	b.mu.Lock()
	got, ok := b.diffs[key]
	b.mu.Unlock()
	if ok {
		return got[0], got[1]
	}
	diff, same, err := o.revisionDiff(ctx, as, r, b.store)
	if err != nil {
		// Not cached: the manager may not have numbered the revision yet.
		return "", err.Error()
	}
	if diff == "" {
		note = same
	}
	b.mu.Lock()
	if b.diffs == nil {
		b.diffs = map[string][2]string{}
	}
	b.diffs[key] = [2]string{diff, note}
	b.mu.Unlock()
	return diff, note
}

// in is the plugin's options for namespace ns, writing to out and errOut.
func (b *webBackend) in(ns string, out, errOut *bytes.Buffer) *Options {
	o := *b.o
	o.ns = ns
	o.Streams.In = strings.NewReader("")
	if out != nil {
		o.Streams.Out, o.Streams.ErrOut = out, errOut
	}
	return &o
}

func (b *webBackend) Review(ctx context.Context, ns, name string) (*planweb.Review, error) {
	o := b.in(ns, nil, nil)
	as, err := o.get(ctx, name)
	if err != nil {
		return nil, err
	}
	v := &planweb.Review{Namespace: ns, Name: name}
	r := underReview(as)
	if r == nil {
		v.Nothing = nothingUnderReview(as).Error()
		return v, nil
	}
	rs := reviewOf(as, r)
	v.Title, v.Plan, v.ReviewID, v.Turn = planTitle(r.Plan), r.Plan, r.ID, r.Turn
	v.PlanSHA256 = planmode.PlanSHA256(r.Plan)
	v.Posted = postedLine(rs, r)
	v.State = reviewState(as, r)
	v.Expires = expiresAt(as, rs, r)
	v.Open = awaitingDecision(as) != nil
	v.Phase = string(v1alpha1.ReviewPending)
	if rs != nil {
		v.Revision, v.Phase, v.Closed = rs.Revision, string(rs.Phase), rs.Phase != v1alpha1.ReviewPending
		if rs.Revision > 0 {
			v.RevisionText = revisionLine(as, rs, name)
		}
		if len(rs.Votes) > 0 {
			v.Decisions = votesLine(rs.Votes)
		}
	}
	v.Approvals = approvalsLine(rs)
	v.Diff, v.DiffNote = b.diff(ctx, o, as, r)
	return v, nil
}

// approvalsLine is "1 of 2 approvals (ReviewPolicy two-person needs 2 distinct approvers)".
func approvalsLine(rs *v1alpha1.ReviewStatus) string {
	if rs == nil {
		return "not counted yet: the manager has not opened the review"
	}
	required := rs.ApprovalsRequired
	if required < 1 {
		required = 1
	}
	return fmt.Sprintf("%d of %d approvals (%s)", rs.Approvals, required, policyText(rs))
}

func (b *webBackend) Inbox(ctx context.Context) (*planweb.Inbox, error) {
	o := b.in(b.o.ns, nil, nil)
	sessions, err := o.listSessions(ctx, b.all)
	if err != nil {
		return nil, err
	}
	in := &planweb.Inbox{Scope: "namespace " + b.o.ns}
	if b.all {
		in.Scope = "all namespaces"
	}
	for _, it := range awaitingReview(sessions) {
		in.Items = append(in.Items, planweb.InboxItem{
			Namespace: it.as.Namespace, Name: it.as.Name, Title: termtext.Line(planTitle(it.plan.Plan)),
			Revision: revisionOf(it.as, it.plan), Since: it.since, WaitingFor: waitingFor(it.as, it.plan),
		})
	}
	return in, nil
}

// Decide runs the command line's decision (approve, revise, dismiss) bound to the digest the
// page showed; its reply and warnings are what the page shows.
func (b *webBackend) Decide(ctx context.Context, ns, name string, d planweb.Decision) (string, error) {
	var out, errOut bytes.Buffer
	o := b.in(ns, &out, &errOut)
	o.wait = DefaultWait
	f := decideFlags{planSHA256: d.PlanSHA256}
	var kind v1alpha1.ReviewDecisionType
	switch d.Kind {
	case planweb.Approve:
		kind = v1alpha1.ReviewApprove
	case planweb.KeepPlanning:
		kind = v1alpha1.ReviewKeepPlanning
		if err := checkText("the feedback", d.Feedback, maxFeedbackChars, "spec.review.feedback"); err != nil {
			return "", err
		}
		f.feedback = d.Feedback
	case planweb.Dismiss:
		kind = v1alpha1.ReviewDismiss
	default:
		return "", fmt.Errorf("unknown decision %q", d.Kind)
	}
	err := o.decide(ctx, name, kind, f)
	return strings.TrimSpace(errOut.String() + out.String()), err
}

// Watch watches the one session; a watch the API server ends is started again.
func (b *webBackend) Watch(ctx context.Context, ns, name string, changed func()) error {
	for {
		w, err := b.o.c.Watch(ctx, &v1alpha1.AgentSessionList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
		if err != nil {
			return b.in(ns, nil, nil).explain(err, name, "watch", "watch the session")
		}
		start := time.Now()
		for range w.ResultChan() {
			changed()
		}
		w.Stop()
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) < time.Second {
			return fmt.Errorf("the watch of session %q ended at once (the API server closed it)", name)
		}
	}
}
