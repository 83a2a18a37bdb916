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

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

func newListCommand(o *Options) *cobra.Command {
	var all, awaiting bool
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List AgentSessions with their plan state, pending selection and review",
		Long: `List the AgentSessions of the namespace (or of every namespace with -A), one per line:

  PLAN      the committed state: plan or default (status.planMode.active, from the session log)
  PENDING   a selection waiting for the agent's next step boundary: entering, leaving, or -
  REVIEW    the plan review: awaiting (a plan waits for kubectl plan approve|revise|dismiss),
            decided (a decision waits for the manager), approved, revised, dismissed,
            rejected, expired, or -
  READY     the Ready condition
  AGE       since the AgentSession was created

--awaiting-review lists the plans waiting for a decision instead, oldest first: the plan's
title, its revision, how long it has waited (by the manager's clock), and what it waits for (a
decision, or more approvals under the namespace's ReviewPolicy, and whose approval cannot count).

Needs "list" on agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan list
  kubectl plan list -A
  kubectl plan list --awaiting-review -A`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if awaiting {
				return o.inbox(cmd.Context(), all) // inbox.go
			}
			return o.list(cmd.Context(), all)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the sessions of every namespace")
	cmd.Flags().BoolVar(&awaiting, "awaiting-review", false, "List only the plans waiting for a decision, oldest first, with their age, revision and what each waits for")
	return cmd
}

func (o *Options) list(ctx context.Context, all bool) error {
	items, err := o.listSessions(ctx, all) // inbox.go
	if err != nil {
		return err
	}
	l := v1alpha1.AgentSessionList{Items: items}
	if len(l.Items) == 0 {
		if all {
			_, err := fmt.Fprintln(o.Streams.ErrOut, "No AgentSessions found.")
			return err
		}
		_, err := fmt.Fprintf(o.Streams.ErrOut, "No AgentSessions found in namespace %s.\n", o.ns)
		return err
	}
	sort.Slice(l.Items, func(i, j int) bool {
		a, b := l.Items[i], l.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return writeList(o.Streams.Out, l.Items, all, time.Now())
}

func writeList(out io.Writer, items []v1alpha1.AgentSession, all bool, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	if all {
		fmt.Fprint(w, "NAMESPACE\t")
	}
	fmt.Fprintln(w, "NAME\tPLAN\tPENDING\tREVIEW\tREADY\tAGE")
	for i := range items {
		as := &items[i]
		if all {
			fmt.Fprintf(w, "%s\t", as.Namespace)
		}
		ready := "Unknown"
		for _, c := range as.Status.Conditions {
			if c.Type == v1alpha1.ConditionReady {
				ready = string(c.Status)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", as.Name, planShort(as.Status.PlanMode.Active), pendingShort(as), reviewShort(as), ready,
			duration.HumanDuration(now.Sub(as.CreationTimestamp.Time)))
	}
	return w.Flush()
}

func planShort(active bool) string {
	if active {
		return "plan"
	}
	return "default"
}

func pendingShort(as *v1alpha1.AgentSession) string {
	pm := as.Status.PlanMode
	switch {
	case !pm.Pending || pm.PendingActive == nil:
		return "-"
	case *pm.PendingActive:
		return "entering"
	default:
		return "leaving"
	}
}

// reviewShort is the review's state in one word; "awaiting" is a plan a person must answer.
func reviewShort(as *v1alpha1.AgentSession) string {
	var req *v1alpha1.PlanReviewRequest
	if as.Status.Agent != nil {
		req = as.Status.Agent.Review
	}
	rs := as.Status.Review
	switch {
	case req == nil && rs == nil:
		return "-"
	case req == nil:
		return phaseWord(rs.Phase)
	case rs != nil && rs.ID == req.ID && rs.Phase != v1alpha1.ReviewPending:
		return phaseWord(rs.Phase)
	case as.Spec.Review != nil && as.Spec.Review.ReviewID == req.ID:
		return "decided"
	default:
		return "awaiting"
	}
}

func phaseWord(p v1alpha1.ReviewPhase) string {
	switch p {
	case v1alpha1.ReviewPending:
		return "awaiting"
	case v1alpha1.ReviewKeptPlanning:
		return "revised" // kubectl plan revise
	}
	return strings.ToLower(string(p))
}
