package plancli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/steerid"
)

// DefaultWait is how long a toggle waits for the manager to take the selection on.
const DefaultWait = 10 * time.Second

// heldGrace is how long a toggle made during a turn waits for a write from the manager, which
// holds its pending write for the agent's next step boundary: a manager that found the turn
// ended commits at once, well within it.
const heldGrace = 2 * time.Second

const waitHelp = `

How the reply is chosen: the plugin makes the decision the manager makes (applied now, waiting
for the next step boundary, cancelled, or no change) from the session's status and spec and,
when the log's store is known, the log's tail, before writing; then (unless --wait=0) it waits
for the manager to take the selection on, reads the outcome from the status it writes, and,
with the log, where the plan/mode event landed (between turns: committed now; at a step
boundary: applied there). A selection made during a turn waits for the agent's next step
boundary, and the manager writes nothing for it until then: unless the manager decides
otherwise within 2 seconds (the turn ended meanwhile), the reply is the prediction, refined by
the log. If the manager does not answer within --wait, the predicted reply is printed with a
warning on stderr.`

func addWaitFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "wait", DefaultWait, "How long to wait for the manager to take the selection on (0: reply from the status read before writing)")
}

func newOnCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "on SESSION",
		Short: "Enter plan mode (like /plan)",
		Long: `Enter plan mode: sets spec.planMode.active=true on the AgentSession.

Between turns the manager appends plan/mode at once and the reply is
"Plan mode on. Use kubectl plan off SESSION to leave."; during a turn the selection waits for the
agent's next step boundary and the reply is "Entering plan mode (applies from the next step). Use
kubectl plan off SESSION to leave.", or, when that step came before the reply, "Plan mode on
(applied at the agent's step S of turn T)."; with plan mode on already, "Plan mode is already on."
(the harness would repeat its entering reply) and nothing is written.
If the PlanModeConfig in force does not exist, the entry waits for it (a warning says so).
With --image, the images go to the agent as its next user message, as /plan with images does.

Needs "patch" on agentsessions.agents.harness.dev.` + waitHelp,
		Example: `  kubectl plan on demo
  kubectl plan on demo -n team-a --context prod`,
		Args: exactSession("on SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.toggle(cmd.Context(), args[0], true, "", nil)
		},
	}
	addWaitFlag(cmd, &o.wait)
	addImageFlag(cmd, &o.images)
	return cmd
}

func newOffCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "off SESSION",
		Short: "Leave plan mode (like /plan off)",
		Long: `Leave plan mode: sets spec.planMode.active=false on the AgentSession.

Replies: "Plan mode off." (left now, between turns); "Leaving plan mode (applies from the next
step)." (during a turn), or "Plan mode off (applied at the agent's step S of turn T)." once that
step came; "Plan mode entry cancelled." (an entry that had not reached the log yet is undone,
nothing is logged); "Plan mode is already off."; "Leaving plan mode is already pending".
With --image it changes nothing and fails with "Image attachments cannot accompany kubectl plan
off.", as /plan off refuses images.

Needs "patch" on agentsessions.agents.harness.dev.` + waitHelp,
		Example: `  kubectl plan off demo`,
		Args:    exactSession("off SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.toggle(cmd.Context(), args[0], false, "", nil)
		},
	}
	addWaitFlag(cmd, &o.wait)
	addImageFlag(cmd, &o.images)
	return cmd
}

func newMessageCommand(o *Options) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "message SESSION TEXT...",
		Short: "Enter plan mode, then send TEXT as the agent's next user message (like /plan TEXT)",
		Long: `Enter plan mode, then deliver TEXT to the agent as the next step's ordinary user message,
under plan guidance (the harness's /plan TEXT).

The words of TEXT are joined with single spaces and trimmed, as /plan trims its message; a long
text goes in a file with --file FILE (--file - reads standard input). A message holds at most
65,536 characters (the CRD's limit on spec.steerQueue[].text): a longer one is refused before
anything is written. Both changes go in one write: spec.planMode.active=true and TEXT appended
to spec.steerQueue with a fresh id (messages the agent already recorded, up to
status.agent.steerID, are dropped). The agent records every queued message once, in order: in
its next step when a turn is open, or, when it is idle, in a turn it starts for them (as /plan
TEXT does through steer()). The reply says what happened to plan mode, then where the message
went: delivered (the turn and step that hold it, read from the session log when its store is
known), queued for the agent's next step, or not taken yet. Unlike the short form "kubectl plan
SESSION TEXT", TEXT "off" here is a message, never an exit.

Needs "patch" on agentsessions.agents.harness.dev.` + waitHelp,
		Example: `  kubectl plan message demo "draft the migration"
  kubectl plan message demo --file notes.md
  git diff | kubectl plan message demo --file -
  kubectl plan message demo "make it look like this" --image mockup.png
  kubectl plan message demo -- --explain the flag handling`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) < 2 && len(o.images) == 0 && file == "" {
				return fmt.Errorf(`"message" needs a session and the text, a --file or an --image (usage: kubectl plan message SESSION TEXT... [--file FILE] [--image FILE]...)`)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := textArg(args[1:], file, o.Streams.In, "the message")
			if err != nil {
				return err
			}
			if strings.TrimSpace(text) == "" && len(o.images) == 0 {
				return fmt.Errorf(`"message" needs a non-blank text or an --image; to only enter plan mode use: kubectl plan on %s`, args[0])
			}
			return o.toggle(cmd.Context(), args[0], true, text, nil)
		},
	}
	addWaitFlag(cmd, &o.wait)
	addImageFlag(cmd, &o.images)
	addFileFlag(cmd, &file, "the message")
	return cmd
}

// written is what a toggle wrote: the state it decided against and the object it produced.
type written struct {
	before    planmode.State
	predicted planmode.Outcome
	// gen is the generation of the write (0: nothing was written).
	gen int64
	// ack is the last boundary acknowledgement before the write, to tell a queued selection
	// that a boundary already flushed from a between-turns commit.
	ack *v1alpha1.BoundaryAck
	// warned: the missing-config warning was printed already.
	warned bool
	// review is the plan under review when the selection was written, nil when none is open.
	review *v1alpha1.PlanReviewRequest
	// from is the log position before the write (the live tail's, else the status's), and
	// fromTail the log's tail there (the empty tail when the log was not read).
	from     int64
	fromTail harness.Tail
	// text and msgID are the message queued with the selection, if any.
	text, msgID string
}

// toggle is set(x) followed, for a message, by steer(text): it reads the session, runs the
// harness's decision against the state the manager will see (the log's tail when its store is
// known), writes spec.planMode.active (and spec.steerQueue) in one resourceVersion-guarded
// merge patch (a conflict re-reads and decides again), waits for the manager's outcome, reads
// what happened, and prints it.
func (o *Options) toggle(ctx context.Context, name string, x bool, message string, notFoundHint func() error) error {
	if !x && len(o.images) > 0 {
		return ImagesWithOffError{} // as /plan off refuses images: before any change
	}
	imgs, err := readImages(o.images)
	if err != nil {
		return err
	}
	text := strings.TrimSpace(message)
	if err := checkText("the message", text, maxMessageChars, "spec.steerQueue[].text"); err != nil {
		return err
	}
	if err := o.complete(); err != nil {
		return err
	}
	as, err := o.get(ctx, name)
	if err != nil {
		return withHint(err, notFoundHint)
	}
	lv := o.openSessionLog(ctx, as.Spec.SessionID, o.Streams.ErrOut)
	defer lv.close()
	w, err := o.writeSelection(ctx, name, x, text, imgs, lv)
	if err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("the session %q kept changing while writing the selection; try again: %w", name, err)
		}
		return withHint(err, notFoundHint)
	}
	h := o.whatHappened(ctx, name, x, w, lv, text != "" || len(imgs) > 0)
	o.printToggleReply(name, x, h, w, text != "" || len(imgs) > 0)
	return nil
}

// withHint adds the short form's hint (a mistyped subcommand) to a missing session's error.
func withHint(err error, hint func() error) error {
	if hint != nil && strings.HasPrefix(err.Error(), "no AgentSession") {
		if h := hint(); h != nil {
			return errors.Join(err, h)
		}
	}
	return err
}

// whatHappened waits (--wait) for the manager to take the selection on and reads the outcome
// from its status, then from the log when it is known, then where a message went. Without an
// answer it is the prediction, with a warning.
func (o *Options) whatHappened(ctx context.Context, name string, x bool, w written, lv *sessionLog, message bool) happened {
	h := happened{outcome: w.predicted, turnOpen: w.before.TurnOpen}
	if w.gen == 0 || o.wait <= 0 {
		return h
	}
	begin := time.Now()
	observed := w.predicted == planmode.Noop // nothing for the manager to decide
	// A selection made during a turn waits for the agent's next step boundary, and the manager
	// writes nothing for it until the agent reaches it (or its hold runs out,
	// --pending-status-delay): a write within the grace is a different decision (the turn
	// ended meanwhile), and none means the prediction stands.
	held := w.predicted == planmode.Queued && w.before.TurnOpen
	if !observed {
		wait := o.wait
		if held {
			wait = min(wait, heldGrace)
		}
		got, seen, ok := o.observe(ctx, name, x, w, wait)
		if !ok && held {
			ok, got = true, h
		}
		if !ok {
			fmt.Fprintf(o.Streams.ErrOut,
				"warning: the manager has not taken the selection on within %s; the reply below is predicted from the state read before the write (check with: kubectl plan status %s)\n",
				o.wait, name)
			return h
		}
		observed, h = true, got
		if seen != nil {
			h.turnOpen = seen.Status.PlanMode.TurnOpen
			if c := apimeta.FindStatusCondition(seen.Status.Conditions, v1alpha1.ConditionReady); x && !w.warned && c != nil && c.Reason == v1alpha1.ReasonConfigMissing {
				fmt.Fprintf(o.Streams.ErrOut, "warning: %s\n", c.Message)
			}
		}
	}
	if lv != nil {
		if evs, err := lv.since(ctx, w.from); err == nil {
			h = fromLog(evs, x, w.fromTail, h)
		}
		if t, err := lv.tail(ctx); err == nil {
			h.turnOpen = t.TurnOpen
		}
	}
	if message && observed {
		if w.text == "" {
			lv = nil // an image-only message: only the status names it
		}
		h.msg = o.awaitDelivery(ctx, name, w, lv, h.turnOpen, min(deliveryWait, o.wait-time.Since(begin)))
	}
	return h
}

// printToggleReply prints what happened to the selection, then to a message and to an open
// review.
func (o *Options) printToggleReply(name string, x bool, h happened, w written, message bool) {
	fmt.Fprintln(o.Streams.Out, toggleReply(x, h, w.before, o.leaveCommand(name)))
	if message {
		fmt.Fprintln(o.Streams.Out, messageReply(h))
	}
	if w.review != nil {
		fmt.Fprintln(o.Streams.Out, openReviewNote(name, x, w.review))
	}
}

// openReviewNote says what a toggle means for the plan review the agent is waiting on: the
// agent's exit_plan_mode call holds its step until the review is decided, so a selection made
// meanwhile applies only at the step after that.
func openReviewNote(name string, x bool, r *v1alpha1.PlanReviewRequest) string {
	if !x {
		return fmt.Sprintf("The review of %q (review %s) is still open and the agent is waiting on it: plan mode is left at the agent's first step after "+
			"the review is decided or expires. To stop waiting, decide it: kubectl plan dismiss %s (or approve, which also leaves plan mode).",
			planTitle(r.Plan), r.ID, name)
	}
	return fmt.Sprintf("The review of %q (review %s) is open: the agent stays in plan mode and waits on it; decide it with kubectl plan approve|revise|dismiss %s.",
		planTitle(r.Plan), r.ID, name)
}

// leaveCommand is the kubectl command that leaves plan mode on this session.
func (o *Options) leaveCommand(name string) string {
	cmd := "kubectl plan off " + name
	if o.ns != "" && o.ns != "default" {
		cmd += " -n " + o.ns
	}
	return cmd
}

func (o *Options) writeSelection(ctx context.Context, name string, x bool, text string, imgs []attachedImage, lv *sessionLog) (written, error) {
	var w written
	stored := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		as, err := o.get(ctx, name)
		if err != nil {
			return err
		}
		w = written{ack: as.Status.PlanMode.LastBoundary, text: text}
		w.before, w.fromTail = readState(ctx, as, lv)
		w.from = w.fromTail.NextSeq
		if r := underReview(as); r != nil {
			if _, closed := decided(as, r); !closed {
				w.review = r
			}
		}
		w.predicted = planmode.Set(w.before, x).Outcome
		desired := as.Spec.PlanMode.Active
		sameSpec := desired != nil && *desired == x
		if sameSpec && w.predicted != planmode.Noop {
			// The state moved away from the selection spec records without a new one. An
			// approval sets spec.planMode.active to false with the decision, so only a plan
			// approved before that rule (webhooks) leaves spec at true after the exit.
			return fmt.Errorf("spec.planMode.active is already %v, but the session's plan mode moved away from it without a new selection "+
				"(a plan approved while spec kept the selection): the manager acts only on a changed value, so run: kubectl plan %s %s && kubectl plan %s %s",
				x, planmode.OnOff(!x), name, planmode.OnOff(x), name)
		}
		if x && w.predicted != planmode.Noop {
			w.warned = o.warnMissingConfig(ctx, as)
		}
		spec := map[string]any{}
		if !sameSpec {
			spec["planMode"] = map[string]any{"active": x}
		}
		if text != "" || len(imgs) > 0 {
			q, err := queueMessage(as, v1alpha1.SteerMessage{Text: text, Images: imageRefs(imgs)})
			if err != nil {
				return err
			}
			if !stored {
				// The bytes go first: a message never names an image the agent cannot read.
				if err := o.storeImages(ctx, as, imgs); err != nil {
					return err
				}
				stored = true
			}
			spec["steerQueue"] = q
			w.msgID = q[len(q)-1].ID
		}
		if len(spec) == 0 {
			return nil // noop, and spec already records the selection: nothing to write
		}
		why := "toggle plan mode"
		if text != "" || len(imgs) > 0 {
			why = "toggle plan mode and send a message"
		}
		out, err := o.patchSpec(ctx, as, spec, why)
		if err != nil {
			return err
		}
		w.gen = out.Generation
		return nil
	})
	return w, err
}

// readState is the state the decision takes, and the log's tail before the write: the tail
// itself when the log is known; else the status's view, with the log position it reflects.
func readState(ctx context.Context, as *v1alpha1.AgentSession, lv *sessionLog) (planmode.State, harness.Tail) {
	if lv != nil {
		if t, err := lv.tail(ctx); err == nil {
			return stateOf(as, &t), t
		}
	}
	t := harness.EmptyTail()
	t.NextSeq, t.TurnOpen, t.Active = as.Status.PlanMode.NextSeq, as.Status.PlanMode.TurnOpen, as.Status.PlanMode.Active
	return StateOf(as), t
}

// maxQueued is spec.steerQueue's size limit (the CRD's maxItems).
const maxQueued = 64

// queueMessage is spec.steerQueue with m appended under a new id, after every id the session has
// used (pkg/steerid: the webhook refuses any other): the messages the agent already recorded
// (up to status.agent.steerID) are dropped, so every message is delivered once, in order.
func queueMessage(as *v1alpha1.AgentSession, m v1alpha1.SteerMessage) ([]v1alpha1.SteerMessage, error) {
	recorded := ""
	if as.Status.Agent != nil {
		recorded = as.Status.Agent.SteerID
	}
	last := recorded
	var q []v1alpha1.SteerMessage
	for i, e := range as.Spec.SteerQueue {
		last = steerid.Max(last, e.ID)
		if e.ID == recorded {
			q = append(q[:0], as.Spec.SteerQueue[i+1:]...)
			break
		}
		q = append(q, e)
	}
	for _, e := range q {
		last = steerid.Max(last, e.ID)
	}
	m.ID = steerid.Next("kp-", last, time.Now())
	if len(q) >= maxQueued {
		return nil, fmt.Errorf("session %q already has %d messages the agent has not recorded (spec.steerQueue holds at most %d); "+
			"wait for the agent to take them (kubectl plan status %s) and send again", as.Name, len(q), maxQueued, as.Name)
	}
	return append(q, m), nil
}

// observe waits for the manager to take selection x on (status.observedGeneration reaches the
// write and status.planMode.selection is x) and reads which set() outcome it had. The decision
// only differs from the prediction in whether a turn was open, which the status may not show.
func (o *Options) observe(ctx context.Context, name string, x bool, w written, within time.Duration) (happened, *v1alpha1.AgentSession, bool) {
	var seen *v1alpha1.AgentSession
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		as, err := o.get(ctx, name)
		if err != nil {
			return false, err
		}
		sel := as.Status.PlanMode.Selection
		if as.Status.ObservedGeneration < w.gen || sel == nil || *sel != x {
			return false, nil
		}
		seen = as
		return true, nil
	})
	if err != nil || seen == nil {
		return happened{}, nil, false
	}
	if x == w.before.Logged {
		// The target was the opposite pending state: cancelled, whether or not a turn is open.
		return happened{outcome: planmode.Cancelled}, seen, true
	}
	pm := seen.Status.PlanMode
	if pm.PendingActive != nil && *pm.PendingActive == x {
		return happened{outcome: planmode.Queued}, seen, true
	}
	if pm.Active == x {
		// Committed between turns, unless a boundary flushed a queued selection meanwhile: an
		// acknowledgement after the write whose boundary appended the plan/mode (its NextSeq is
		// past the position reported). A boundary that only delivered the notice of a
		// between-turns commit appended nothing.
		if ack := pm.LastBoundary; ack != nil && ack.Result == v1alpha1.BoundaryAdmitted && ack.Active == x && !sameAck(ack, w.ack) && ack.NextSeq > ack.Seq {
			return happened{outcome: planmode.Queued, appliedTurn: ack.Turn, appliedStep: ack.Step}, seen, true
		}
		return happened{outcome: planmode.Committed}, seen, true
	}
	return happened{outcome: w.predicted}, seen, true
}

func sameAck(a, b *v1alpha1.BoundaryAck) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Turn == b.Turn && a.Step == b.Step && a.Seq == b.Seq
}

// warnMissingConfig says when an entry will wait for its PlanModeConfig (the manager holds an
// entry whose guidance does not exist). Without permission to read configs it says nothing here;
// the manager's Ready condition (reason ConfigMissing) then says it after the write.
// It reports whether it warned.
func (o *Options) warnMissingConfig(ctx context.Context, as *v1alpha1.AgentSession) bool {
	name := as.ConfigName()
	err := o.c.Get(ctx, types.NamespacedName{Namespace: as.Namespace, Name: name}, &v1alpha1.PlanModeConfig{})
	if apierrors.IsNotFound(err) {
		fmt.Fprintf(o.Streams.ErrOut,
			"warning: PlanModeConfig %q does not exist in namespace %q: entering plan mode waits until it is created (or set spec.planMode.configRef.name)\n", name, as.Namespace)
		return true
	}
	return false
}
