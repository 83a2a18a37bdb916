package plancli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/termtext"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// planTitle is the first markdown heading of the plan, or "Plan" (the harness's card title).
func planTitle(plan string) string { return planmode.PlanTitle(plan) }

const decideHelp = `

The decision is your vote, appended to spec.reviewVotes: reviewers deciding at the same moment
all count, and the admission webhook records who you are (from your credentials, never from
the client) and when. The plugin waits (--wait, default 10s) for the manager to act on it: to
close the review, or, when the namespace's ReviewPolicy needs more approvers, to count your
approval ("1 more approval needed"); it fails if the review closed otherwise first (for example
it expired) or if the policy does not count your vote (the reason names the rule). With
--wait=0 it returns once the vote is written.

The vote names the review id and the SHA-256 of the plan text (planSHA256), so it never applies
to a newer plan or another text: without a flag the plugin decides the plan it reads now (and
an approval first prints the revision and SHA-256 it approves); if the agent presents another
plan before the write lands it stops and asks you to look again. With --revision N or
--plan-sha256 (both printed by "kubectl plan review") it decides only if the plan under review
is still the text you read; with --review-id only if that is still the plan under review
("stale review id"). The manager applies a decision only to the text it names.

Needs "patch" on agentsessions.agents.harness.dev and the "approve" verb on agentsessions/review
in group agents.harness.dev (separate from the permission to toggle plan mode).`

func newReviewCommand(o *Options) *cobra.Command {
	var f reviewFlags
	cmd := &cobra.Command{
		Use:   "review SESSION [--wait[=DURATION]]",
		Short: "Print the plan under review",
		Long: `Print the plan the agent presented with exit_plan_mode (status.agent.review): its title, its
revision among the plans the session posted, review id, turn, SHA-256, when the manager first saw
it and which agent posted it, where the review stands (its phase, the REVIEW column of kubectl
plan list; approvals counted and needed under the namespace's ReviewPolicy), and the plan itself.
Text the agent wrote is printed escaped: a control character or a bidirectional override shows as
\x1b or \u202e, never acts on your terminal. --raw prints only the plan text, byte for byte
(escaped when the output is a terminal). --diff prints what changed since the previous revision,
read from the session log (the previous text is the exit_plan_mode call's arguments there; its
digest is checked against the one the manager recorded), so it needs the log store (--store,
$` + StoreEnv + ` or the kubeconfig context).

Without --wait it fails when the session has presented no plan. With --wait it waits for a plan
that awaits a decision (up to 10m, or --wait=DURATION), then prints it: send a message, and
kubectl plan review SESSION --wait shows the plan once the agent presents it.

With --web the review opens in a browser: the plan rendered from Markdown (sanitized: no
script, no remote content), its facts, the diff against the previous revision (read as --diff
reads it), and Approve, Keep planning (with feedback) and Dismiss, each bound to the plan's
SHA-256 and answered with the same texts and refusals as kubectl plan approve|revise|dismiss.
The page updates live when the agent posts a new plan or someone decides. The server stops once
the review is decided (--keep: it stays, for the next revision).` + webHelp + `

Needs "get" on agentsessions.agents.harness.dev (and "watch" for --web's live updates).`,
		Example: `  kubectl plan review demo
  kubectl plan review demo --web
  kubectl plan review demo --wait
  kubectl plan review demo --diff
  kubectl plan review demo --wait=30s --raw > plan.md`,
		Args: exactSession("review SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkWebFlags(cmd, f.webFlags); err != nil {
				return err
			}
			if f.web {
				return o.serveWeb(cmd.Context(), f.webFlags, args[0], f.store, false)
			}
			if f.diff {
				return o.reviewDiff(cmd.Context(), args[0], f.store)
			}
			return o.review(cmd.Context(), args[0], f.raw, f.wait)
		},
	}
	cmd.Flags().BoolVar(&f.raw, "raw", false, "Print only the plan text")
	cmd.Flags().BoolVar(&f.diff, "diff", false, "Print what changed since the previous revision (reads the session log)")
	cmd.Flags().DurationVar(&f.wait, "wait", 0, "Wait up to this long for a plan that awaits a decision (--wait alone: 10m)")
	cmd.Flags().Lookup("wait").NoOptDefVal = defaultReviewWait.String()
	addWebFlags(cmd, &f.webFlags, "the review")
	cmd.Flags().BoolVar(&f.keep, "keep", false, "With --web, keep serving after the review is decided")
	cmd.Flags().StringVar(&f.store, "store", "", "Session-log store URL for --diff and --web's diff (default: $"+StoreEnv+", then the kubeconfig context's)")
	cmd.MarkFlagsMutuallyExclusive("raw", "diff", "web")
	cmd.MarkFlagsMutuallyExclusive("wait", "diff")
	cmd.MarkFlagsMutuallyExclusive("wait", "web")
	return cmd
}

type reviewFlags struct {
	raw, diff bool
	store     string
	wait      time.Duration
	webFlags
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
		text := r.Plan
		if isTerminal(o.Streams.Out) {
			text = termtext.Text(text)
		}
		_, err := fmt.Fprint(o.Streams.Out, text)
		if err == nil && (len(text) == 0 || text[len(text)-1] != '\n') {
			_, err = fmt.Fprintln(o.Streams.Out)
		}
		return err
	}
	printPlan(o.Streams.Out, as, r)
	return nil
}

// printPlan prints the plan under review with its facts; text the agent wrote is escaped.
func printPlan(out io.Writer, as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) {
	rs := reviewOf(as, r)
	fmt.Fprintf(out, "Plan:       %s\n", termtext.Line(planTitle(r.Plan)))
	if rs != nil && rs.Revision > 0 {
		fmt.Fprintf(out, "Revision:   %s\n", revisionLine(as, rs, as.Name))
	}
	fmt.Fprintf(out, "Review ID:  %s\n", r.ID)
	fmt.Fprintf(out, "Turn:       %d\n", r.Turn)
	fmt.Fprintf(out, "SHA-256:    %s\n", planmode.PlanSHA256(r.Plan))
	if posted := postedLine(rs, r); posted != "" {
		fmt.Fprintf(out, "Posted:     %s\n", posted)
	}
	fmt.Fprintf(out, "State:      %s\n", reviewState(as, r))
	if rs != nil && len(rs.Votes) > 0 {
		fmt.Fprintf(out, "Decisions:  %s\n", votesLine(rs.Votes))
	}
	if exp := expiresAt(as, rs, r); exp != "" {
		fmt.Fprintf(out, "Expires:    %s\n", exp)
	}
	fmt.Fprintln(out)
	text := termtext.Text(r.Plan)
	fmt.Fprint(out, text)
	if len(text) > 0 && text[len(text)-1] != '\n' {
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

// sessionUnderReview reads session name and the plan under review; it fails when there is none.
func (o *Options) sessionUnderReview(ctx context.Context, name string) (*v1alpha1.AgentSession, *v1alpha1.PlanReviewRequest, error) {
	if err := o.complete(); err != nil {
		return nil, nil, err
	}
	as, err := o.get(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	r := underReview(as)
	if r == nil {
		return nil, nil, nothingUnderReview(as)
	}
	return as, r, nil
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

// reviewState is the review's phase (the REVIEW column's word) and what it waits for.
func reviewState(as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest) string {
	rs := reviewOf(as, r)
	if rs != nil && rs.Phase != v1alpha1.ReviewPending {
		s := string(rs.Phase)
		if by := decidersOf(as, rs); by != "" {
			s += " by " + by
		}
		if rs.DecidedAt != nil {
			s += " at " + rs.DecidedAt.UTC().Format(time.RFC3339)
		}
		return s
	}
	if phase, ok := decided(as, r); ok {
		return string(v1alpha1.ReviewPending) + "; decision " + phase + " written, waiting for the manager"
	}
	if rs != nil && rs.ApprovalsRequired > 1 {
		return fmt.Sprintf("%s, awaiting approval: %d of %d (%s); %s (kubectl plan approve|revise|dismiss %s)%s", v1alpha1.ReviewPending,
			rs.Approvals, rs.ApprovalsRequired, policyText(rs), approvalsNeededText(rs.ApprovalsRequired-rs.Approvals), as.Name, agentGoneText(rs))
	}
	return fmt.Sprintf("%s, awaiting a decision (kubectl plan approve|revise|dismiss %s)%s", v1alpha1.ReviewPending, as.Name, agentGoneText(rs))
}

type decideFlags struct {
	reviewID   string
	planSHA256 string
	revision   int64
	feedback   string
}

func addDecisionFlags(cmd *cobra.Command, f *decideFlags) {
	cmd.Flags().StringVar(&f.reviewID, "review-id", "", "Decide only if this is the id of the plan under review")
	cmd.Flags().StringVar(&f.planSHA256, "plan-sha256", "", "Decide only if this is the SHA-256 of the plan under review (kubectl plan review prints it)")
	cmd.Flags().Int64Var(&f.revision, "revision", 0, "Decide only if this revision, as kubectl plan review numbered it, is the plan under review")
}

func newApproveCommand(o *Options) *cobra.Command {
	var f decideFlags
	cmd := &cobra.Command{
		Use:   "approve SESSION",
		Short: "Approve the plan under review: the agent leaves plan mode at its next step",
		Long: `Approve the plan under review (decision Approve). Once the approvals the namespace's ReviewPolicy
asks for are in (one, without a policy), the agent's exit_plan_mode call returns
{approved: true}, and the manager records a silent exit that is applied at the agent's next step
boundary (no notice: the tool result tells the model).

The write that completes the approval also sets spec.planMode.active=false (the admission
webhook does it): approving leaves plan mode, so the selection in spec says so too, and a later
"kubectl plan on" selects plan mode again.` + decideHelp,
		Example: `  kubectl plan approve demo --revision 2
  kubectl plan approve demo --plan-sha256 "$(kubectl plan review demo | sed -n 's/^SHA-256: *//p')"
  kubectl plan approve demo`,
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
	var mine *v1alpha1.ReviewDecision
	err := retry.OnError(retry.DefaultRetry, voteRaced, func() error {
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
		if err := checkDecisionTarget(name, as, r, digest, f, seen, seenDigest); err != nil {
			return err
		}
		seen, seenDigest, title = r.ID, digest, planTitle(r.Plan)
		if phase, ok := decided(as, r); ok {
			return fmt.Errorf("nothing under review: the plan %q (review %s) was already decided: %s", termtext.Line(title), r.ID, phase)
		}
		// The digest binds the decision to this text: the webhook and the manager refuse it for
		// any other.
		vote := v1alpha1.ReviewDecision{ReviewID: r.ID, Decision: d, PlanSHA256: digest}
		if d == v1alpha1.ReviewKeepPlanning {
			vote.Feedback = f.feedback
		}
		deselect := d == v1alpha1.ReviewApprove && completesApproval(as, r)
		obj, err := o.appendVote(ctx, as, vote, deselect, "decide the plan review")
		if err != nil && deselect && notLastApproval(err) {
			obj, err = o.appendVote(ctx, as, vote, false, "decide the plan review")
		}
		if err != nil {
			return err
		}
		mine = newestVote(obj, vote)
		if d == v1alpha1.ReviewApprove && f.planSHA256 == "" && f.revision == 0 {
			// Bound to the text read now, not to one named by the reviewer: say which
			// (docs/review.md, "Integrity").
			fmt.Fprintf(o.Streams.ErrOut, "Approving %s of %q (review %s, SHA-256 %s): the text kubectl plan review %s shows.\n",
				revisionWord(revisionOf(as, r)), termtext.Line(title), r.ID, digest, name)
		}
		return nil
	})
	if err != nil {
		if voteRaced(err) {
			return fmt.Errorf("the session %q kept changing while writing the decision; try again: %w", name, err)
		}
		return err
	}
	review := last.Status.Review
	if gone := agentGoneText(reviewOf(last, underReview(last))); gone != "" {
		fmt.Fprintf(o.Streams.ErrOut, "warning: the plan's agent is gone%s\n", strings.TrimPrefix(gone, "; the agent is gone"))
	}
	if o.wait > 0 {
		if review, err = o.awaitDecision(ctx, name, seen, d, mine); err != nil {
			return err
		}
	}
	fmt.Fprintln(o.Streams.Out, decisionReply(d, termtext.Line(title), seen, name, f.feedback != "", leavingSelected(last), stillNeeded(review, seen)))
	return nil
}

// decisionReply says what a decision does, including the session's plan state afterwards:
// leaving plan mode may have been selected (kubectl plan off) while the agent waited on the review.
// needed, when set, says how many approvals the review still needs after an approval.
func decisionReply(d v1alpha1.ReviewDecisionType, title, id, name string, feedback, leaving bool, needed string) string {
	switch d {
	case v1alpha1.ReviewApprove:
		if needed != "" {
			return fmt.Sprintf("Approved %q (review %s): %s; the plan stays under review until then.", title, id, needed)
		}
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
// (--review-id, --plan-sha256, --revision) and the one read before a retry (seen, seenDigest).
func checkDecisionTarget(name string, as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest, digest string, f decideFlags, seen, seenDigest string) error {
	if f.revision != 0 {
		if err := checkRevision(name, as, r, digest, f.revision); err != nil {
			return err
		}
	}
	switch {
	case f.reviewID != "" && f.reviewID != r.ID:
		return fmt.Errorf("stale review id %q: the plan under review is now %q (review %s); read it with: kubectl plan review %s", f.reviewID, termtext.Line(planTitle(r.Plan)), r.ID, name)
	case seen != "" && seen != r.ID:
		return fmt.Errorf("the agent presented a new plan (review %s) while your decision was being written; nothing was decided. Read it with: kubectl plan review %s", r.ID, name)
	case f.planSHA256 != "" && f.planSHA256 != digest:
		return fmt.Errorf("the plan under review %q (review %s) is not the text you read: its SHA-256 is %s, not %s; nothing was decided. "+
			"Read it again with: kubectl plan review %s", termtext.Line(planTitle(r.Plan)), r.ID, digest, f.planSHA256, name)
	case seenDigest != "" && seenDigest != digest:
		return fmt.Errorf("the plan under review %s changed while your decision was being written; nothing was decided. Read it again with: kubectl plan review %s", r.ID, name)
	}
	return nil
}

func addDecisionWaitFlag(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "wait", DefaultWait, "How long to wait for the manager to act on the decision (0: do not wait)")
}

// awaitDecision waits for the manager to act on the decision mine on review id: to close the
// review, or, for an approval a policy needs more of, to count it. It fails if the review closed
// with another outcome first (it expired, or was withdrawn), or if the manager did not count
// the vote. It returns the review as the manager last recorded it.
func (o *Options) awaitDecision(ctx context.Context, name, id string, d v1alpha1.ReviewDecisionType, mine *v1alpha1.ReviewDecision) (*v1alpha1.ReviewStatus, error) {
	want := map[v1alpha1.ReviewDecisionType]v1alpha1.ReviewPhase{
		v1alpha1.ReviewApprove: v1alpha1.ReviewApproved, v1alpha1.ReviewKeepPlanning: v1alpha1.ReviewKeptPlanning, v1alpha1.ReviewDismiss: v1alpha1.ReviewDismissed,
	}[d]
	var closed, counted *v1alpha1.ReviewStatus
	var uncounted *v1alpha1.ReviewVoteStatus
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
			closed = &v1alpha1.ReviewStatus{ID: id, Phase: v1alpha1.ReviewWithdrawn}
			return true, nil
		case r.ID != id:
			// The agent already presented its next plan: it only does so once the manager
			// answered ours.
			closed = &v1alpha1.ReviewStatus{ID: id, Phase: want}
			return true, nil
		}
		if rs := as.Status.Review; rs != nil && rs.ID == id && mine != nil {
			if v := recordedVote(rs, mine); v != nil {
				if !v.Counted {
					uncounted = v
				}
				counted = rs
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case uncounted != nil:
		return counted, fmt.Errorf("the manager did not count your decision on review %s: %s", id, uncounted.Reason)
	case counted != nil:
		return counted, nil
	case err != nil && closed == nil:
		fmt.Fprintf(o.Streams.ErrOut, "warning: the manager has not acted on the decision within %s (check with: kubectl plan review %s)\n", o.wait, name)
		return nil, nil
	case closed.Phase == want:
		return closed, nil
	case closed.Phase == v1alpha1.ReviewWithdrawn:
		return nil, fmt.Errorf("the agent stopped waiting for review %s before the manager applied your decision (it withdrew the plan); nothing was decided", id)
	}
	return nil, fmt.Errorf("review %s closed as %s before your decision applied: %s", id, closed.Phase, closed.Message)
}
