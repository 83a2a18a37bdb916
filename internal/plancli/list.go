package plancli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

type listFlags struct {
	all    bool
	watch  bool
	output string
}

func newListCommand(o *Options) *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:     "list [-A] [-w] [-o json|yaml]",
		Aliases: []string{"ls"},
		Short:   "List AgentSessions with their plan mode, pending plan mode, selection and review",
		Long: `List the AgentSessions of the namespace (or of every namespace with -A), one per line, with
the columns of kubectl get agentsessions (the same headers, the same values):

  PLAN-MODE   plan mode committed in the session log (status.planMode.active): true (on), false (off)
  PENDING     the plan mode waiting for the agent's next step boundary (status.planMode.pendingActive):
              true (entering), false (leaving), empty when nothing waits
  SELECTED    your selection (spec.planMode.active, kubectl plan on|off); empty: none, the session
              follows its log
  REVIEW      the last plan review (status.review.phase): Pending (a plan awaits kubectl plan
              approve|revise|dismiss), Approved, KeepPlanning (sent back with kubectl plan revise),
              Dismissed, Expired, Rejected; empty before the first
  READY       the Ready condition
  AGE         since the AgentSession was created

-w prints the list, then a line for each change until Ctrl-C. -o json or -o yaml prints the same
facts as a structured document.

Needs "list" on agentsessions.agents.harness.dev (and "watch" for -w).`,
		Example: `  kubectl plan list
  kubectl plan list -A
  kubectl plan list -w
  kubectl plan list -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.list(cmd.Context(), f)
		},
	}
	cmd.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, "List the sessions of every namespace")
	cmd.Flags().BoolVarP(&f.watch, "watch", "w", false, "After the list, print a line for each change, until Ctrl-C")
	addOutputFlag(cmd, &f.output)
	return cmd
}

func (o *Options) list(ctx context.Context, f listFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	if f.watch && f.output != "" {
		return fmt.Errorf("-w prints table lines: leave out -o %s (or drop -w)", f.output)
	}
	if err := o.complete(); err != nil {
		return err
	}
	var l v1alpha1.AgentSessionList
	var opts []client.ListOption
	if !f.all {
		opts = append(opts, client.InNamespace(o.ns))
	}
	if err := o.c.List(ctx, &l, opts...); err != nil {
		return o.explain(err, "", "list", "list the sessions")
	}
	sort.Slice(l.Items, func(i, j int) bool {
		a, b := l.Items[i], l.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	rows := make([]SessionRow, 0, len(l.Items))
	for i := range l.Items {
		rows = append(rows, rowOf(&l.Items[i]))
	}
	if f.output != "" {
		return printStructured(o.Streams.Out, struct {
			Items []SessionRow `json:"items"`
		}{rows}, f.output)
	}
	if len(rows) == 0 && !f.watch {
		if f.all {
			_, err := fmt.Fprintln(o.Streams.ErrOut, "No AgentSessions found.")
			return err
		}
		_, err := fmt.Fprintf(o.Streams.ErrOut, "No AgentSessions found in namespace %s.\n", o.ns)
		return err
	}
	t := newTable(o.Streams.Out, f.all)
	t.header()
	now := time.Now()
	for _, r := range rows {
		t.row(r, now)
	}
	if err := t.flush(); err != nil || !f.watch {
		return err
	}
	return o.watchList(ctx, t, l.ResourceVersion, opts)
}

// watchList prints a row for every change after resourceVersion, as kubectl get -w does,
// until ctx ends (Ctrl-C).
func (o *Options) watchList(ctx context.Context, t *table, resourceVersion string, opts []client.ListOption) error {
	w, err := o.c.Watch(ctx, &v1alpha1.AgentSessionList{}, append(opts, &client.ListOptions{Raw: rawWatchFrom(resourceVersion)})...)
	if err != nil {
		return o.explain(err, "", "watch", "watch the sessions")
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("the watch of the sessions ended (the API server closed it): run kubectl plan list -w again")
			}
			as, isSession := ev.Object.(*v1alpha1.AgentSession)
			if !isSession || ev.Type == watch.Bookmark {
				continue
			}
			r := rowOf(as)
			if ev.Type == watch.Deleted {
				r.Ready = "(deleted)"
			}
			t.row(r, time.Now())
			if err := t.flush(); err != nil {
				return err
			}
		}
	}
}

// table prints rows in the vocabulary's columns.
type table struct {
	w   *tabwriter.Writer
	all bool
}

func newTable(out io.Writer, all bool) *table {
	return &table{w: tabwriter.NewWriter(out, 0, 4, 3, ' ', 0), all: all}
}

func (t *table) header() {
	if t.all {
		fmt.Fprint(t.w, "NAMESPACE\t")
	}
	fmt.Fprintf(t.w, "NAME\t%s\t%s\t%s\t%s\t%s\tAGE\n", ColumnPlanMode, ColumnPending, ColumnSelected, ColumnReview, ColumnReady)
}

func (t *table) row(r SessionRow, now time.Time) {
	if t.all {
		fmt.Fprintf(t.w, "%s\t", r.Namespace)
	}
	planMode, pending, selected, review, ready := r.cells()
	fmt.Fprintf(t.w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, planMode, pending, selected, review, ready, duration.HumanDuration(now.Sub(r.Created)))
}

func (t *table) flush() error { return t.w.Flush() }
