// Package plancli is the logic of the `kubectl plan` plugin: toggling an AgentSession's plan
// mode with the harness's /plan replies, steering a message into the next step, showing the
// state and the plan-relevant log, and answering a plan review.
package plancli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/harness-dev/planmode-operator/internal/version"
)

const rootLong = `Enter and leave plan mode on an AgentSession, talk to its agent, and review the plans it
presents, the way the harness's /plan command and plan review do.

Replies are the harness's /plan texts in kubectl's words, chosen by the same decision the
manager makes (applied now, waiting for the next step, cancelled, or no change), computed from
the session's status and spec just before the change is written:

  Plan mode on. Use kubectl plan off SESSION to leave.                 (entered now)
  Entering plan mode (applies from the next step). Use kubectl plan off SESSION to leave.
                                                                       (any other entry)
  Plan mode off.                                                       (left now)
  Leaving plan mode (applies from the next step).                      (queued, or already leaving)
  Plan mode entry cancelled.                                           (a pending entry undone)
  Plan mode is already inactive.

Command shapes (SESSION is the AgentSession's metadata.name):

  kubectl plan on SESSION                 enter plan mode            (= /plan)
  kubectl plan off SESSION                leave plan mode            (= /plan off)
  kubectl plan message SESSION TEXT...    enter plan mode, then send TEXT as the next step's
                                          user message             (= /plan TEXT)
  kubectl plan SESSION [off|TEXT...]      short form that mirrors /plan [off|message]: no TEXT
                                          enters plan mode, exactly "off" leaves it, anything
                                          else is entered plan mode plus a message.
                                          A SESSION named like a subcommand needs the long forms.
  kubectl plan list [-A]                  every session: plan state, pending, review, age
  kubectl plan status SESSION             committed, pending, desired, config, last change, review
  kubectl plan log SESSION                the plan-relevant events of the session log
  kubectl plan use-store URL              record the log store in the kubeconfig context
  kubectl plan review SESSION             the plan under review
  kubectl plan approve SESSION            approve it (the agent leaves plan mode at its next step;
                                          the same write sets spec.planMode.active=false)
  kubectl plan revise SESSION --feedback TEXT   keep planning, with feedback for the agent
  kubectl plan dismiss SESSION            dismiss the review (the agent stops its turn)

Toggling needs "patch" on agentsessions.agents.harness.dev. Deciding a review additionally needs
the "approve" verb on agentsessions/review (a separate permission, so the people who toggle plan
mode need not be the ones who approve plans).

Plugin note: kubectl only finds the plugin when "plan" is the first word, so put kubectl flags
after it (kubectl plan -n team-a on demo), or use KUBECONFIG and the current context.`

// NewRootCommand builds `kubectl plan` and its subcommands.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	o := &Options{Flags: genericclioptions.NewConfigFlags(true), Streams: streams}
	root := &cobra.Command{
		Use: "plan SESSION [off|MESSAGE...]",
		// kubectl runs the plugin binary kubectl-plan; help and errors name it "kubectl plan".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl plan"},
		Short:       "Enter and leave plan mode, message the agent, and review its plans",
		Long:        rootLong,
		Example: `  # Enter plan mode on the session "demo" in namespace team-a
  kubectl plan on demo -n team-a

  # Enter plan mode and ask the agent for a plan (the message becomes its next user message)
  kubectl plan demo "draft the migration"

  # Show what is committed, what is pending, and any plan under review
  kubectl plan status demo

  # Read the plan and approve it
  kubectl plan review demo
  kubectl plan approve demo`,
		Args:                       cobra.ArbitraryArgs,
		Version:                    version.String("kubectl-plan"),
		SuggestionsMinimumDistance: 2,
		SilenceUsage:               true,
		SilenceErrors:              true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			session, rest := args[0], args[1:]
			if strings.HasPrefix(session, "-") {
				return fmt.Errorf("unexpected flag %q before the session name", session)
			}
			if len(rest) == 1 && strings.TrimSpace(rest[0]) == "off" {
				return o.toggle(cmd.Context(), session, false, "", func() error { return hintSubcommand(cmd, session) })
			}
			return o.toggle(cmd.Context(), session, true, strings.Join(rest, " "), func() error { return hintSubcommand(cmd, session) })
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	o.Flags.AddFlags(root.PersistentFlags())
	addWaitFlag(root, &o.wait)
	addImageFlag(root, &o.images)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)

	root.AddCommand(
		newOnCommand(o), newOffCommand(o), newMessageCommand(o),
		newListCommand(o), newStatusCommand(o), newLogCommand(o), newUseStoreCommand(o),
		newReviewCommand(o), newApproveCommand(o), newReviseCommand(o), newDismissCommand(o),
	)
	return root
}

// hintSubcommand is called when the short form's SESSION does not exist: it may have been a
// mistyped subcommand.
func hintSubcommand(cmd *cobra.Command, word string) error {
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		return fmt.Errorf("(if you meant the subcommand, did you mean %q?)", s[0])
	}
	return nil
}

func exactSession(use string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%q needs exactly one argument, the session name (usage: kubectl plan %s)", cmd.Name(), use)
		}
		return nil
	}
}
