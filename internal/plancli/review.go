package plancli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// planTitle is the first markdown heading of the plan, or "Plan" (the harness's card title).
func planTitle(plan string) string { return planmode.PlanTitle(plan) }

const decideHelp = `

The plugin waits (--wait, default 10s) for the manager to close the review with the decision
and fails if the review closed otherwise first (for example it expired). With --wait=0 it
returns once the decision is written.

The decision names the review id (spec.review.reviewID) and the SHA-256 of the plan text
(spec.review.planSHA256), so it never applies to a newer plan or another text: without
--review-id the plugin decides the plan it read, and if the agent presents another plan before
the write lands it stops and asks you to look again. With --review-id the decision is refused
unless that is still the plan under review ("stale review id"); with --plan-sha256 (printed by
"kubectl plan review") unless the plan under review is still the text you read. The manager
applies a decision only to the text it names.

Needs "patch" on agentsessions.agents.harness.dev and the "approve" verb on agentsessions/review
in group agents.harness.dev (separate from the permission to toggle plan mode).`

func newReviewCommand(o *Options) *cobra.Command {
	var raw bool
	var waitFor time.Duration
	cmd := &cobra.Command{
		Use:   "review SESSION [--wait[=DURATION]]",
		Short: "Print the plan under review",
		Long: `Print the plan the agent presented with exit_plan_mode (status.agent.review): its title,
review id, turn, when it was posted, where the review stands (its phase, the REVIEW column of
kubectl plan list), and the plan itself, verbatim. --raw prints only the plan text.

Without --wait it fails when the session has presented no plan. With --wait it waits for a plan
that awaits a decision (up to 10m, or --wait=DURATION), then prints it: send a message, and
kubectl plan review SESSION --wait shows the plan once the agent presents it.

Needs "get" on agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan review demo
  kubectl plan review demo --wait
  kubectl plan review demo --wait=30s --raw > plan.md`,
		Args: exactSession("review SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.review(cmd.Context(), args[0], raw, waitFor)
		},
	}
	cmd.Flags().BoolVar(&raw, "raw", false, "Print only the plan text")
	cmd.Flags().DurationVar(&waitFor, "wait", 0, "Wait up to this long for a plan that awaits a decision (--wait alone: 10m)")
	cmd.Flags().Lookup("wait").NoOptDefVal = defaultReviewWait.String()
	return cmd
}

// defaultReviewWait is how long review --wait waits for a plan when given no duration.
const defaultReviewWait = 10 * time.Minute

func (o *Options) review(ctx context.Context, name string, raw bool, waitFor time.Duration) error {
	if err := o.complete(); err != nil {
		return err
	}
	as, err := o.get(ctx, name)
	if err != nil {
		return err
	}
	if waitFor > 0 {
		if as, err = o.awaitPlan(ctx, name, as, waitFor); err != nil {
			return err
		}
	}
	r := underReview(as)
	if r == nil {
		return nothingUnderReview(as)
	}
	if raw {
		_, err := fmt.Fprint(o.Streams.Out, r.Plan)
		if err == nil && (len(r.Plan) == 0 || r.Plan[len(r.Plan)-1] != '\n') {
			_, err = fmt.Fprintln(o.Streams.Out)
		}
		return err
	}
	printPlan(o.Streams.Out, as, r)
	return nil
}

// printPlan prints the plan under review with its facts.
func printPlan(out io.Writer, as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) {
	fmt.Fprintf(out, "Plan:       %s\n", planTitle(r.Plan))
	fmt.Fprintf(out, "Review ID:  %s\n", r.ID)
	fmt.Fprintf(out, "Turn:       %d\n", r.Turn)
	fmt.Fprintf(out, "SHA-256:    %s\n", planmode.PlanSHA256(r.Plan))
	if r.RequestedAt != nil {
		fmt.Fprintf(out, "Posted:     %s\n", r.RequestedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(out, "State:      %s\n", reviewState(as, r))
	if as.Spec.ReviewTimeout != nil && r.RequestedAt != nil {
		fmt.Fprintf(out, "Expires:    %s\n", r.RequestedAt.Add(as.Spec.ReviewTimeout.Duration).UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, r.Plan)
	if len(r.Plan) > 0 && r.Plan[len(r.Plan)-1] != '\n' {
		fmt.Fprintln(out)
	}
}

// awaitingDecision is the plan presented and not decided yet, or nil.
func awaitingDecision(as *v1alpha1.AgentSession) *v1alpha1.PlanReviewRequest {
	r := underReview(as)
	if r == nil {
		return nil
	}
	if _, closed := decided(as, r); closed {
		return nil
	}
	return r
}

// awaitPlan waits up to waitFor for a plan that awaits a decision, saying on stderr that it
// waits; the session as it then is.
func (o *Options) awaitPlan(ctx context.Context, name string, as *v1alpha1.AgentSession, waitFor time.Duration) (*v1alpha1.AgentSession, error) {
	if awaitingDecision(as) != nil {
		return as, nil
	}
	fmt.Fprintf(o.Streams.ErrOut, "Waiting up to %s for the agent of %q to present a plan (Ctrl-C stops)...\n", waitFor, name)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, waitFor, false, func(ctx context.Context) (bool, error) {
		got, err := o.get(ctx, name)
		if err != nil {
			return false, err
		}
		as = got
		return awaitingDecision(as) != nil, nil
	})
	switch {
	case err == nil:
		return as, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("stopped waiting for a plan from %q", name)
	case wait.Interrupted(err):
		return nil, fmt.Errorf("no plan awaits a decision on %q after %s: the agent presents one with exit_plan_mode in plan mode "+
			"(kubectl plan message %s TEXT enters plan mode and asks); see kubectl plan log %s", name, waitFor, name, name)
	}
	return nil, err
}

func underReview(as *v1alpha1.AgentSession) *v1alpha1.PlanReviewRequest {
	if as.Status.Agent == nil {
		return nil
	}
	return as.Status.Agent.Review
}

func nothingUnderReview(as *v1alpha1.AgentSession) error {
	return fmt.Errorf("nothing under review: session %q has not presented a plan (status.agent.review is empty); the agent presents one with exit_plan_mode while in plan mode", as.Name)
}

// decided reports the decision already taken on review r, if any.
func decided(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) (string, bool) {
	if rs := as.Status.Review; rs != nil && rs.ID == r.ID && rs.Phase != v1alpha1.ReviewPending {
		return string(rs.Phase), true
	}
	if d := as.Spec.Review; d != nil && d.ReviewID == r.ID {
		return string(d.Decision), true
	}
	return "", false
}

// reviewState is the review's phase (the REVIEW column's word) and what it waits for.
func reviewState(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) string {
	if rs := as.Status.Review; rs != nil && rs.ID == r.ID && rs.Phase != v1alpha1.ReviewPending {
		s := string(rs.Phase)
		if rs.DecidedAt != nil {
			s += " at " + rs.DecidedAt.UTC().Format(time.RFC3339)
		}
		return s
	}
	if d := as.Spec.Review; d != nil && d.ReviewID == r.ID {
		return string(v1alpha1.ReviewPending) + "; decision " + string(d.Decision) + " written, waiting for the manager"
	}
	return fmt.Sprintf("%s, awaiting a decision (kubectl plan approve|revise|dismiss %s)", v1alpha1.ReviewPending, as.Name)
}

type decideFlags struct {
	reviewID   string
	planSHA256 string
	feedback   string
}

func addDecisionFlags(cmd *cobra.Command, f *decideFlags) {
	cmd.Flags().StringVar(&f.reviewID, "review-id", "", "Decide only if this is the id of the plan under review")
	cmd.Flags().StringVar(&f.planSHA256, "plan-sha256", "", "Decide only if this is the SHA-256 of the plan under review (kubectl plan review prints it)")
}

func newApproveCommand(o *Options) *cobra.Command {
	var f decideFlags
	cmd := &cobra.Command{
		Use:   "approve SESSION",
		Short: "Approve the plan under review: the agent leaves plan mode at its next step",
		Long: `Approve the plan under review (spec.review.decision=Approve). The agent's exit_plan_mode call
returns {approved: true}, and the manager records a silent exit that is applied at the agent's
next step boundary (no notice: the tool result tells the model).

The same write sets spec.planMode.active=false: approving leaves plan mode, so the selection in
spec says so too, and a later "kubectl plan on" (or a plain patch of spec.planMode.active to
true) selects plan mode again. The admission webhook refuses an approval that leaves
spec.planMode.active at true.` + decideHelp,
		Example: `  kubectl plan approve demo
  kubectl plan approve demo --review-id 3f1c9a2e
  kubectl plan approve demo --plan-sha256 "$(kubectl plan review demo | sed -n 's/^SHA-256: *//p')"`,
		Args: exactSession("approve SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.decide(cmd.Context(), args[0], v1alpha1.ReviewApprove, f)
		},
	}
	addDecisionFlags(cmd, &f)
	addDecisionWaitFlag(cmd, &o.wait)
	return cmd
}

func newReviseCommand(o *Options) *cobra.Command {
	var f decideFlags
	var file string
	cmd := &cobra.Command{
		Use:   "revise SESSION [FEEDBACK...]",
		Short: "Keep planning: send the plan back with feedback",
		Long: `Keep planning (spec.review.decision=KeepPlanning; the review's phase becomes KeepPlanning). The
agent's exit_plan_mode call fails with "The user chose to keep planning; their feedback: TEXT",
or without feedback with "The user chose to keep planning; revise the plan and present it
again." Plan mode stays on.

The feedback is the words after the session, joined with single spaces (or --feedback TEXT, or
--file FILE for a long one, - for standard input): at most 65,536 characters, the CRD's limit
on spec.review.feedback, checked before anything is written.` + decideHelp,
		Example: `  kubectl plan revise demo "consider the resume path"
  kubectl plan revise demo --file review-notes.md
  kubectl plan revise demo`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 {
				return fmt.Errorf(`"revise" needs the session name, then the feedback if any (usage: kubectl plan revise SESSION [FEEDBACK...] [--file FILE])`)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			feedback, err := feedbackOf(args[1:], f.feedback, file, o.Streams.In)
			if err != nil {
				return err
			}
			f.feedback = strings.TrimSpace(feedback)
			return o.decide(cmd.Context(), args[0], v1alpha1.ReviewKeepPlanning, f)
		},
	}
	addDecisionFlags(cmd, &f)
	cmd.Flags().StringVar(&f.feedback, "feedback", "", "Feedback for the agent, returned verbatim in the tool result (or give it as words after the session)")
	addFileFlag(cmd, &file, "the feedback")
	addDecisionWaitFlag(cmd, &o.wait)
	return cmd
}

// feedbackOf is revise's feedback: the words after the session, --feedback or --file, checked
// against the CRD's limit. Two of them at once is an error naming both.
func feedbackOf(words []string, flag, file string, in io.Reader) (string, error) {
	if flag != "" && (len(words) > 0 || file != "") {
		other := "as words after the session"
		if file != "" {
			other = "with --file " + file
		}
		return "", fmt.Errorf("feedback given twice: with --feedback and %s; give it one way", other)
	}
	text := flag
	if text == "" {
		var err error
		if text, err = textArg(words, file, in, "the feedback"); err != nil {
			return "", err
		}
	}
	return text, checkText("the feedback", text, maxFeedbackChars, "spec.review.feedback")
}

func newDismissCommand(o *Options) *cobra.Command {
	var f decideFlags
	cmd := &cobra.Command{
		Use:   "dismiss SESSION",
		Short: "Dismiss the review: the agent stops its turn; the session stays in plan mode unless leaving it is selected",
		Long: `Dismiss the review (spec.review.decision=Dismiss), to speak to the agent instead. The agent's
exit_plan_mode call returns {approved: false} and its turn concludes; plan mode stays on until
your next message (for example: kubectl plan message SESSION TEXT).` + decideHelp,
		Example: `  kubectl plan dismiss demo`,
		Args:    exactSession("dismiss SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.decide(cmd.Context(), args[0], v1alpha1.ReviewDismiss, f)
		},
	}
	addDecisionFlags(cmd, &f)
	addDecisionWaitFlag(cmd, &o.wait)
	return cmd
}

// decide writes spec.review for the plan under review, guarded by the resourceVersion it was
// read at. A conflict is retried only while the same plan is still under review.
// leavingSelected: the session was in plan mode with leaving it selected and not applied yet
// (a pending selection of plan mode off), as read before the decision was written.
func leavingSelected(as *v1alpha1.AgentSession) bool {
	if as == nil {
		return false
	}
	st := StateOf(as)
	return st.Logged && st.Pending != nil && !st.Pending.Active
}

func (o *Options) decide(ctx context.Context, name string, d v1alpha1.ReviewDecisionType, f decideFlags) error {
	if err := o.complete(); err != nil {
		return err
	}
	var seen, seenDigest, title string
	var last *v1alpha1.AgentSession
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		as, err := o.get(ctx, name)
		if err != nil {
			return err
		}
		last = as
		r := underReview(as)
		if r == nil {
			return nothingUnderReview(as)
		}
		digest := planmode.PlanSHA256(r.Plan)
		if err := checkDecisionTarget(name, r, digest, f, seen, seenDigest); err != nil {
			return err
		}
		seen, seenDigest, title = r.ID, digest, planTitle(r.Plan)
		if phase, ok := decided(as, r); ok {
			return fmt.Errorf("nothing under review: the plan %q (review %s) was already decided: %s", title, r.ID, phase)
		}
		// The digest binds the decision to this text: the webhook and the manager refuse it for
		// any other.
		review := map[string]any{"reviewID": r.ID, "decision": string(d), "feedback": nil, "planSHA256": digest}
		if d == v1alpha1.ReviewKeepPlanning && f.feedback != "" {
			review["feedback"] = f.feedback
		}
		spec := map[string]any{"review": review}
		if d == v1alpha1.ReviewApprove {
			// Approving leaves plan mode, so the user's selection becomes false in the same
			// write (the webhook requires it unless unset): the manager reacts only to a
			// changed spec.planMode.active, and a later "on" must be one.
			spec["planMode"] = map[string]any{"active": false}
		}
		_, err = o.patchSpec(ctx, as, spec, "decide the plan review")
		return err
	})
	if err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("the session %q kept changing while writing the decision; try again: %w", name, err)
		}
		return err
	}
	if o.wait > 0 {
		if err := o.awaitDecision(ctx, name, seen, d); err != nil {
			return err
		}
	}
	fmt.Fprintln(o.Streams.Out, decisionReply(d, title, seen, name, f.feedback != "", leavingSelected(last)))
	return nil
}

// decisionReply says what a decision does, including the session's plan state afterwards:
// leaving plan mode may have been selected (kubectl plan off) while the agent waited on the review.
func decisionReply(d v1alpha1.ReviewDecisionType, title, id, name string, feedback, leaving bool) string {
	switch d {
	case v1alpha1.ReviewApprove:
		return fmt.Sprintf("Approved %q (review %s): the agent leaves plan mode at its next step.", title, id)
	case v1alpha1.ReviewKeepPlanning:
		with := ""
		if feedback {
			with = " with your feedback"
		}
		if leaving {
			return fmt.Sprintf("Sent %q (review %s) back%s: the agent revises it, but plan mode off is selected (kubectl plan off), "+
				"so the session leaves plan mode at the agent's next step.", title, id, with)
		}
		return fmt.Sprintf("Sent %q (review %s) back%s: the agent keeps planning; the session stays in plan mode.", title, id, with)
	}
	if leaving {
		return fmt.Sprintf("Dismissed the review of %q (review %s): the agent stops its turn; plan mode off is selected (kubectl plan off), "+
			"so the session leaves plan mode at the agent's next step, in its next turn.", title, id)
	}
	return fmt.Sprintf("Dismissed the review of %q (review %s): the agent stops its turn; the session stays in plan mode until you run kubectl plan off %s.", title, id, name)
}

// checkDecisionTarget stops a decision unless the plan under review is the one asked for
// (--review-id, --plan-sha256) and the one read before a retry (seen, seenDigest).
func checkDecisionTarget(name string, r *v1alpha1.PlanReviewRequest, digest string, f decideFlags, seen, seenDigest string) error {
	switch {
	case f.reviewID != "" && f.reviewID != r.ID:
		return fmt.Errorf("stale review id %q: the plan under review is now %q (review %s); read it with: kubectl plan review %s", f.reviewID, planTitle(r.Plan), r.ID, name)
	case seen != "" && seen != r.ID:
		return fmt.Errorf("the agent presented a new plan (review %s) while your decision was being written; nothing was decided. Read it with: kubectl plan review %s", r.ID, name)
	case f.planSHA256 != "" && f.planSHA256 != digest:
		return fmt.Errorf("the plan under review %q (review %s) is not the text you read: its SHA-256 is %s, not %s; nothing was decided. "+
			"Read it again with: kubectl plan review %s", planTitle(r.Plan), r.ID, digest, f.planSHA256, name)
	case seenDigest != "" && seenDigest != digest:
		return fmt.Errorf("the plan under review %s changed while your decision was being written; nothing was decided. Read it again with: kubectl plan review %s", r.ID, name)
	}
	return nil
}

func addDecisionWaitFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "wait", DefaultWait, "How long to wait for the manager to act on the decision (0: do not wait)")
}

// awaitDecision waits for the manager to close review id, and fails if it closed it with
// another outcome than the decision (the review expired, or was withdrawn, first).
func (o *Options) awaitDecision(ctx context.Context, name, id string, d v1alpha1.ReviewDecisionType) error {
	want := map[v1alpha1.ReviewDecisionType]v1alpha1.ReviewPhase{
		v1alpha1.ReviewApprove: v1alpha1.ReviewApproved, v1alpha1.ReviewKeepPlanning: v1alpha1.ReviewKeptPlanning, v1alpha1.ReviewDismiss: v1alpha1.ReviewDismissed,
	}[d]
	var closed *v1alpha1.ReviewStatus
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, o.wait, true, func(ctx context.Context) (bool, error) {
		as, err := o.get(ctx, name)
		if err != nil {
			return false, err
		}
		if rs := as.Status.Review; rs != nil && rs.ID == id && rs.Phase != v1alpha1.ReviewPending {
			closed = rs
			return true, nil
		}
		switch r := underReview(as); {
		case r == nil:
			closed = &v1alpha1.ReviewStatus{ID: id, Phase: "Withdrawn"}
			return true, nil
		case r.ID != id:
			// The agent already presented its next plan: it only does so once the manager
			// answered ours.
			closed = &v1alpha1.ReviewStatus{ID: id, Phase: want}
			return true, nil
		}
		return false, nil
	})
	switch {
	case err != nil && closed == nil:
		fmt.Fprintf(o.Streams.ErrOut, "warning: the manager has not acted on the decision within %s (check with: kubectl plan review %s)\n", o.wait, name)
		return nil
	case closed.Phase == want:
		return nil
	case closed.Phase == "Withdrawn":
		return fmt.Errorf("the agent stopped waiting for review %s before the manager applied your decision (it withdrew the plan); nothing was decided", id)
	}
	return fmt.Errorf("review %s closed as %s before your decision applied: %s", id, closed.Phase, closed.Message)
}
