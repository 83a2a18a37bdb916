package plancli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/termtext"
)

// The reviewer's inbox: `kubectl plan list --awaiting-review [-A]`, also `kubectl plan inbox
// [-A] [--web]`.

func newInboxCommand(o *Options) *cobra.Command {
	var f webFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "inbox [-A] [--web]",
		Short: "List the plans awaiting a decision, oldest first (--web: in a browser)",
		Long: `List the plans waiting for a decision in the namespace (every namespace with -A), oldest
first, as kubectl plan list --awaiting-review does: the plan's title, its revision, how long it
has waited (by the manager's clock), and what it waits for (a decision, or more approvals under
the namespace's ReviewPolicy).

With --web the list is a page: one click opens the review of a plan (as kubectl plan review
SESSION --web shows it), with its decisions.` + webHelp + `

Needs "list" on agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan inbox
  kubectl plan inbox -A --web`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkWebFlags(cmd, f); err != nil {
				return err
			}
			if f.web {
				return o.serveWeb(cmd.Context(), f, "", "", all)
			}
			return o.inbox(cmd.Context(), all)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the plans of every namespace")
	addWebFlags(cmd, &f, "the inbox")
	return cmd
}

// awaitingItem is one plan waiting for a decision.
type awaitingItem struct {
	as    *v1alpha1.AgentSession
	plan  *v1alpha1.PlanReviewRequest
	since time.Time
}

func (o *Options) inbox(ctx context.Context, all bool) error {
	sessions, err := o.listSessions(ctx, all)
	if err != nil {
		return err
	}
	items := awaitingReview(sessions)
	if len(items) == 0 {
		where := " in namespace " + o.ns
		if all {
			where = ""
		}
		_, err := fmt.Fprintf(o.Streams.ErrOut, "No plans are awaiting review%s.\n", where)
		return err
	}
	return writeInbox(o.Streams.Out, items, all, time.Now())
}

// listSessions lists the AgentSessions of the namespace, or of every namespace.
func (o *Options) listSessions(ctx context.Context, all bool) ([]v1alpha1.AgentSession, error) {
	if err := o.complete(); err != nil {
		return nil, err
	}
	var l v1alpha1.AgentSessionList
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.InNamespace(o.ns))
	}
	if err := o.c.List(ctx, &l, opts...); err != nil {
		return nil, o.explain(err, "", "list", "list the sessions")
	}
	return l.Items, nil
}

// awaitingReview picks the sessions whose plan waits for a decision, oldest first (by when the
// manager first saw the plan, or the agent's time before it has).
func awaitingReview(sessions []v1alpha1.AgentSession) []awaitingItem {
	var items []awaitingItem
	for i := range sessions {
		as := &sessions[i]
		r := underReview(as)
		if r == nil {
			continue
		}
		rs := reviewOf(as, r)
		if rs != nil && rs.Phase != v1alpha1.ReviewPending {
			continue
		}
		if _, ok := decided(as, r); ok {
			continue
		}
		it := awaitingItem{as: as, plan: r, since: as.CreationTimestamp.Time}
		switch {
		case rs != nil && rs.OpenedAt != nil:
			it.since = rs.OpenedAt.Time
		case r.RequestedAt != nil:
			it.since = r.RequestedAt.Time
		}
		items = append(items, it)
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].since.Equal(items[j].since) {
			return items[i].since.Before(items[j].since)
		}
		a, b := items[i].as, items[j].as
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return items
}

func writeInbox(out io.Writer, items []awaitingItem, all bool, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	if all {
		fmt.Fprint(w, "NAMESPACE\t")
	}
	fmt.Fprintln(w, "NAME\tREVISION\tAGE\tPLAN\tWAITING FOR")
	for _, it := range items {
		if all {
			fmt.Fprintf(w, "%s\t", it.as.Namespace)
		}
		rev := "-"
		if n := revisionOf(it.as, it.plan); n > 0 {
			rev = fmt.Sprint(n)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", it.as.Name, rev, duration.HumanDuration(now.Sub(it.since)),
			termtext.Line(abbreviate(planTitle(it.plan.Plan), 48)), waitingFor(it.as, it.plan))
	}
	return w.Flush()
}

// waitingFor says what a plan waits for: a decision, or more approvals, and whose approval
// does not count.
func waitingFor(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) string {
	rs := reviewOf(as, r)
	if rs == nil {
		return "the manager to open the review"
	}
	var parts []string
	switch {
	case rs.ApprovalsRequired > 1:
		parts = append(parts, fmt.Sprintf("%s (%d of %d)", approvalsNeededText(rs.ApprovalsRequired-rs.Approvals), rs.Approvals, rs.ApprovalsRequired))
	default:
		parts = append(parts, "a decision")
	}
	var not []string
	for _, v := range rs.Votes {
		if v.Counted && v.Decision == v1alpha1.ReviewApprove {
			not = append(not, termtext.Line(v.By.Username)+" (approved)")
		}
	}
	if rq := rs.Requester; rq != nil && selfApprovalRefused(rs) {
		not = append(not, termtext.Line(rq.Username)+" (the requester)")
	}
	if len(not) > 0 {
		parts = append(parts, "from anyone but "+strings.Join(not, ", "))
	}
	if c := rs.AgentConnected; c != nil && !*c {
		parts = append(parts, "(agent gone)")
	}
	return strings.Join(parts, " ")
}

// selfApprovalRefused: the manager has refused the requester's approval on this review, or the
// policy is known to forbid it (a vote of the requester was not counted).
func selfApprovalRefused(rs *v1alpha1.ReviewStatus) bool {
	for _, v := range rs.Votes {
		if !v.Counted && rs.Requester != nil && v.By.Username == rs.Requester.Username {
			return true
		}
	}
	return rs.SelfApproval == v1alpha1.SelfApprovalForbidden
}
