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

Replies say what happened, read from what the manager acts on: its status once it has taken
the selection on and, when the session log's store is known (make run records it in its
kubeconfig), the log itself. The harness's /plan texts where they say it:

  Plan mode on. Use kubectl plan off SESSION to leave.
      committed now: no turn was open
  Entering plan mode (applies from the next step). Use kubectl plan off SESSION to leave.
      a turn is open: the agent's next step boundary applies it
  Plan mode on (applied at the agent's step 2 of turn 4). Use kubectl plan off SESSION to leave.
      it waited for a step boundary, which came before the reply
  Plan mode is already on. Use kubectl plan off SESSION to leave.
  Plan mode off.
  Leaving plan mode (applies from the next step).
  Plan mode entry cancelled.
      an entry still waiting for a step boundary is undone; nothing is logged
  Plan mode is already off.

A message adds where it went: "Message delivered: the agent started turn 5 with it.", "Message
delivered at the agent's step 3 of turn 4.", "Message queued for the agent's next step, ...", or
"Message queued; the agent has not taken it yet (an idle agent starts a turn with it)."

The plan state has one set of words everywhere (kubectl plan list, kubectl plan status and the
columns of kubectl get agentsessions): PLAN-MODE (true: on, false: off, as the session log has
it), PENDING (the plan mode waiting for the agent's next step boundary), SELECTED (yours) and
REVIEW (Pending, Approved, KeepPlanning, Dismissed, Expired, Rejected).

Command shapes (SESSION is the AgentSession's metadata.name; tab completion offers them):

  kubectl plan on SESSION                 enter plan mode            (= /plan)
  kubectl plan off SESSION                leave plan mode            (= /plan off)
  kubectl plan message SESSION TEXT...    enter plan mode, then send TEXT as the next step's
                                          user message (= /plan TEXT); --file FILE (- for stdin)
                                          for long text
  kubectl plan SESSION [off|TEXT...]      short form that mirrors /plan [off|message]: no TEXT
                                          enters plan mode, exactly "off" leaves it, anything
                                          else is entered plan mode plus a message.
                                          A SESSION named like a subcommand needs the long forms.
  kubectl plan list [-A] [-w] [-o json|yaml]
                                          every session: plan mode, pending, selected, review
  kubectl plan status SESSION [-o json|yaml]
                                          plan mode, pending, selected, turn, config, last change,
                                          review, Ready
  kubectl plan log SESSION [-f] [--tail N] the plan-relevant events of the session log
  kubectl plan use-store URL              record the log store in the kubeconfig context
  kubectl plan review SESSION [--wait]    the plan under review (--wait: until one is presented;
                                          --web: in a browser, with its diff and decisions)
  kubectl plan inbox [-A] [--web]         the plans awaiting a decision, oldest first
  kubectl plan approve SESSION            approve it (the agent leaves plan mode at its next step;
                                          the same write sets spec.planMode.active=false)
  kubectl plan revise SESSION [FEEDBACK...]
                                          keep planning, with feedback for the agent
  kubectl plan dismiss SESSION            dismiss the review (the agent stops its turn)

Toggling needs "patch" on agentsessions.agents.harness.dev. Deciding a review additionally needs
the "approve" verb on agentsessions/review (a separate permission, so the people who toggle plan
mode need not be the ones who approve plans).

Plugin note: kubectl only finds the plugin when "plan" is the first word, so put kubectl flags
after it (kubectl plan -n team-a on demo), or use KUBECONFIG and the current context. Shell
completion comes through kubectl's own (source <(kubectl completion bash)) once
kubectl_complete-plan, built beside kubectl-plan, is on PATH.`

// offWord is the short form's one word that leaves plan mode (kubectl plan SESSION off).
const offWord = "off"

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
  kubectl plan message demo "draft the migration"

  # Follow the session log while the agent works
  kubectl plan log demo -f

  # Show what is committed, what is pending, and any plan under review
  kubectl plan status demo

  # Wait for the plan, read it, and approve it (or send it back with feedback)
  kubectl plan review demo --wait
  kubectl plan approve demo
  kubectl plan revise demo "cover the rollback too"`,
		Args:                       cobra.ArbitraryArgs,
		Version:                    version.String("kubectl-plan"),
		SuggestionsMinimumDistance: 2,
		SilenceUsage:               true,
		SilenceErrors:              true,
		CompletionOptions: cobra.CompletionOptions{
			HiddenDefaultCmd: true,
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return []string{offWord}, cobra.ShellCompDirectiveNoFileComp
			}
			return o.completeSession(cmd, args, toComplete)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			session, rest := args[0], args[1:]
			if strings.HasPrefix(session, "-") {
				return fmt.Errorf("unexpected flag %q before the session name", session)
			}
			if len(rest) == 1 && strings.TrimSpace(rest[0]) == offWord {
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

	root.SetFlagErrorFunc(flagError)

	root.AddCommand(
		newOnCommand(o), newOffCommand(o), newMessageCommand(o),
		newListCommand(o), newStatusCommand(o), newLogCommand(o), newUseStoreCommand(o),
		newReviewCommand(o), newApproveCommand(o), newReviseCommand(o), newDismissCommand(o),
		newInboxCommand(o),
	)
	for _, c := range root.Commands() {
		if c.ValidArgsFunction == nil && strings.Contains(c.Use, "SESSION") {
			c.ValidArgsFunction = o.completeSession
		}
	}
	return root
}

// flagError names the usage of the command a bad flag was given to, and the command a flag
// belongs to when it is another one's (kubectl plan approve demo --feedback ...).
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		for _, other := range cmd.Root().Commands() {
			if other != cmd && other.Flags().Lookup(name) != nil {
				return fmt.Errorf("%s: --%s is a flag of kubectl plan %s, not of kubectl plan %s (usage: %s)", msg, name, other.Name(), cmd.Name(), cmd.UseLine())
			}
		}
	}
	return fmt.Errorf("%s (usage: %s; see kubectl plan %s --help)", msg, cmd.UseLine(), cmd.Name())
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
			hint := ""
			if len(args) > 1 && (cmd.Name() == "approve" || cmd.Name() == "dismiss") {
				hint = "; feedback goes with kubectl plan revise SESSION FEEDBACK..."
			}
			return fmt.Errorf("%q needs exactly one argument, the session name (usage: kubectl plan %s%s)", cmd.Name(), use, hint)
		}
		return nil
	}
}
