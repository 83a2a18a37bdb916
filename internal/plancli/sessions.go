package plancli

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// sessionNames lists the AgentSession names of the namespace, sorted.
func (o *Options) sessionNames(ctx context.Context) ([]string, error) {
	var l v1alpha1.AgentSessionList
	if err := o.c.List(ctx, &l, client.InNamespace(o.ns)); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(l.Items))
	for _, s := range l.Items {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names, nil
}

// didYouMean names the sessions of the namespace that a mistyped name is close to, with the
// suggestion rules cobra gives mistyped subcommands (edit distance of 2 at most, or a prefix),
// so both kinds of typo are answered alike. Empty when none is close or listing is not allowed.
func (o *Options) didYouMean(ctx context.Context, name string) string {
	names, err := o.sessionNames(ctx)
	if err != nil {
		return ""
	}
	parent := &cobra.Command{SuggestionsMinimumDistance: 2}
	for _, n := range names {
		parent.AddCommand(&cobra.Command{Use: n, Run: func(*cobra.Command, []string) {}})
	}
	s := parent.SuggestionsFor(name)
	if len(s) == 0 {
		return ""
	}
	return fmt.Sprintf("did you mean %q?", strings.Join(s, `" or "`))
}

// notFound is the error for a session that does not exist, with the names it is close to.
func (o *Options) notFound(ctx context.Context, err error, name string) error {
	if !apierrors.IsNotFound(err) || isNoResource(err) {
		return nil
	}
	msg := fmt.Sprintf("no AgentSession %q in namespace %q", name, o.ns)
	if hint := o.didYouMean(ctx, name); hint != "" {
		return fmt.Errorf("%s: %s (list them with: kubectl plan list -n %s)", msg, hint, o.ns)
	}
	return fmt.Errorf("%s (list them with: kubectl plan list -n %s)", msg, o.ns)
}

// completeSession completes the first argument with the namespace's session names (kubectl's
// shell completion, through kubectl_complete-plan); later arguments are free text.
func (o *Options) completeSession(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if err := o.complete(); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names, err := o.sessionNames(context.Background())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := names[:0]
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
