package plancli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/util/retry"

	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

func newOnCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "on SESSION",
		Short: "Enter plan mode (like /plan)",
		Long: `Enter plan mode: sets spec.planMode.active=true on the AgentSession.

Between turns the manager appends plan/mode at once and the reply is
"Plan mode on. Use /plan off to leave."; during a turn the selection waits for the agent's next
step boundary and the reply is "Entering plan mode (applies from the next step). Use /plan off to
leave." (the harness gives that same reply when plan mode is already on or already pending).

Needs "patch" on agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan on demo
  kubectl plan on demo -n team-a --context prod`,
		Args: exactSession("on SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.toggle(cmd.Context(), args[0], true, "", nil)
		},
	}
}

func newOffCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "off SESSION",
		Short: "Leave plan mode (like /plan off)",
		Long: `Leave plan mode: sets spec.planMode.active=false on the AgentSession.

Replies: "Plan mode off." (left now, between turns); "Leaving plan mode (applies from the next
step)." (during a turn, or already leaving); "Plan mode entry cancelled." (an entry that had not
reached the log yet is undone, nothing is logged); "Plan mode is already inactive."

Needs "patch" on agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan off demo`,
		Args:    exactSession("off SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.toggle(cmd.Context(), args[0], false, "", nil)
		},
	}
}

func newMessageCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "message SESSION TEXT...",
		Short: "Enter plan mode, then send TEXT as the agent's next user message (like /plan TEXT)",
		Long: `Enter plan mode, then deliver TEXT to the agent as the next step's ordinary user message,
under plan guidance (the harness's /plan TEXT).

The words of TEXT are joined with single spaces and trimmed, as /plan trims its message. Both
changes go in one write: spec.planMode.active=true and spec.steer={id: <fresh>, text: TEXT};
the agent records each steer id once (status.agent.steerID). The reply is the entering reply of
"kubectl plan on". Unlike the short form "kubectl plan SESSION TEXT", TEXT "off" here is a
message, never an exit.

Needs "patch" on agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan message demo "draft the migration"
  kubectl plan message demo -- --explain the flag handling`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return fmt.Errorf(`"message" needs a session and the text (usage: kubectl plan message SESSION TEXT...)`)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			text := strings.Join(args[1:], " ")
			if strings.TrimSpace(text) == "" {
				return fmt.Errorf(`"message" needs a non-blank text; to only enter plan mode use: kubectl plan on %s`, args[0])
			}
			return o.toggle(cmd.Context(), args[0], true, text, nil)
		},
	}
}

// toggle is set(x) followed, for a message, by steer(text): it reads the session, computes the
// harness's decision against the state the manager will see, writes spec.planMode.active (and
// spec.steer) in one resourceVersion-guarded merge patch, and prints the reply. On a conflict it
// re-reads and recomputes, so the reply always describes the state the write was made against.
func (o *Options) toggle(ctx context.Context, name string, x bool, message string, notFoundHint func() error) error {
	if err := o.complete(); err != nil {
		return err
	}
	text := strings.TrimSpace(message)
	var reply string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		as, err := o.get(ctx, name)
		if err != nil {
			return err
		}
		var outcome planmode.Outcome
		outcome, reply = Decide(StateOf(as), x)

		desired := as.Spec.PlanMode.Active
		sameSpec := desired != nil && *desired == x
		if sameSpec && outcome != planmode.Noop {
			// spec already says x and the manager has taken it on, but the state moved away
			// from it without a user selection (an approved exit). Writing the same value is no
			// change the manager can see.
			return fmt.Errorf("cannot select plan mode %s again: spec.planMode.active is already %v and the manager treats only a changed value as a new selection; clear it first with: kubectl patch agentsession %s -n %s --type merge -p '{\"spec\":{\"planMode\":{\"active\":null}}}'", onOff(x), x, name, o.ns)
		}
		spec := map[string]any{}
		if !sameSpec {
			spec["planMode"] = map[string]any{"active": x}
		}
		if text != "" {
			spec["steer"] = map[string]any{"id": "kp-" + string(uuid.NewUUID()), "text": text}
		}
		if len(spec) == 0 {
			return nil // noop, and spec already records the selection: nothing to write
		}
		why := "toggle plan mode"
		if text != "" {
			why = "toggle plan mode and send a message"
		}
		return o.patchSpec(ctx, as, spec, why)
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("the session %q kept changing while writing the selection; try again: %w", name, err)
		}
		if notFoundHint != nil && strings.HasPrefix(err.Error(), "no AgentSession") {
			if h := notFoundHint(); h != nil {
				return errors.Join(err, h)
			}
		}
		return err
	}
	fmt.Fprintln(o.Streams.Out, reply)
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
