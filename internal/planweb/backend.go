// Package planweb serves plan reviews to a browser on 127.0.0.1 for kubectl plan review --web
// and kubectl plan inbox --web: the plan rendered and sanitized, the diff against the previous
// revision, the decision forms, and live updates by Server-Sent Events. It holds no credential
// and decides nothing itself: every read and every decision goes through a Backend, which
// kubectl plan implements with the user's kubeconfig and its own decision code.
package planweb

import (
	"context"
	"time"
)

// Backend is what the pages need from the cluster. Its errors are shown to the user as they
// are (HTML-escaped): they are kubectl plan's own refusal texts.
type Backend interface {
	// Review is the plan under review of session ns/name as it is now.
	Review(ctx context.Context, ns, name string) (*Review, error)
	// Inbox lists the plans awaiting a decision, oldest first.
	Inbox(ctx context.Context) (*Inbox, error)
	// Decide writes the decision on the plan whose SHA-256 is d.PlanSHA256 and returns the
	// reply kubectl plan prints for it.
	Decide(ctx context.Context, ns, name string, d Decision) (string, error)
	// Watch calls changed after each change of the session until ctx ends, or returns the
	// error that stopped the watch.
	Watch(ctx context.Context, ns, name string, changed func()) error
}

// Decision kinds, as the form posts them.
const (
	Approve      = "approve"
	KeepPlanning = "revise"
	Dismiss      = "dismiss"
)

// Decision is a reviewer's answer from the page.
type Decision struct {
	// Kind is Approve, KeepPlanning or Dismiss.
	Kind string
	// PlanSHA256 binds the decision to the text the page showed.
	PlanSHA256 string
	// Feedback goes with KeepPlanning.
	Feedback string
}

// Review is the plan under review and its facts. Every string but Plan is shown escaped;
// Plan is rendered from Markdown and sanitized.
type Review struct {
	Namespace, Name string
	// Nothing, when set, says why no plan is shown (no plan presented yet).
	Nothing string
	Title   string
	Plan    string
	// Revision is the plan's number among the session's plans (0 before the manager opened
	// the review); RevisionText says what it follows.
	Revision     int64
	RevisionText string
	ReviewID     string
	Turn         int64
	PlanSHA256   string
	Posted       string
	// Phase is the review's phase (Pending, Approved, ...); State says where it stands and
	// Approvals counts them under the policy ("1 of 2 approvals").
	Phase     string
	State     string
	Approvals string
	Decisions string
	Expires   string
	// Open: the plan awaits a decision (the forms are shown). Closed: the manager closed its
	// review (a decision written is not yet closed: the manager applies it).
	Open, Closed bool
	// Diff is the unified diff from the previous revision, or DiffNote why there is none.
	Diff     string
	DiffNote string
}

// Inbox is the list of plans awaiting a decision.
type Inbox struct {
	// Scope names where it looked: "namespace team-a" or "all namespaces".
	Scope string
	Items []InboxItem
}

// InboxItem is one plan awaiting a decision.
type InboxItem struct {
	Namespace, Name string
	Title           string
	Revision        int64
	Since           time.Time
	// WaitingFor says what it waits for (a decision, or approvals still needed).
	WaitingFor string
}
