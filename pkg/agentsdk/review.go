package agentsdk

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/apiretry"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// Codes of a failed exit_plan_mode call (ExitError.Code).
const (
	// ExitUnknownTool: the committed plan state is not active, so the tool is not admitted in
	// this step (the harness answers a call outside plan mode with UNKNOWN_TOOL).
	ExitUnknownTool = "UNKNOWN_TOOL"
	// ExitInvalidPlan: the plan does not start with a level-1 "# " heading.
	ExitInvalidPlan = "INVALID_PLAN"
	// ExitKeepPlanning: the reviewer chose to keep planning (with or without feedback).
	ExitKeepPlanning = "KEEP_PLANNING"
	// ExitExpired: nobody answered within spec.reviewTimeout.
	ExitExpired = "REVIEW_EXPIRED"
	// ExitRejected: the manager refused to open the review (plan mode not committed).
	ExitRejected = "REVIEW_REJECTED"
	// ExitAborted: the caller's context or timeout ended the wait; the review was withdrawn.
	ExitAborted = "ASK_ABORTED"
	// ExitNoChannel: the plan could not be put before a reviewer: the API server did not take
	// the post, or the manager did not open the review, within ReviewOpenWait. The post was
	// withdrawn; plan mode stays on.
	ExitNoChannel = "NO_CHANNEL"
)

// UnknownToolMessage is the text of an exit_plan_mode call outside committed plan mode: the
// harness's answer for a tool the step does not admit.
var UnknownToolMessage = harness.UnknownToolText(harness.ExitToolName)

// ReviewOpenWait bounds how long ExitPlanMode waits for its review to be open: the post of
// status.agent.review and the manager's status.review naming it. Past it nobody can answer
// the plan (the API server or the manager is away), and the call fails with the harness's
// no-channel text rather than waiting out the caller's whole review timeout.
const ReviewOpenWait = 10 * time.Second

// ExitError is a failed exit_plan_mode call. The agent records it as an isError tool result
// whose text is "Error: " + Message (ToolResult with isError true); plan mode stays on.
type ExitError struct {
	Code     string
	ReviewID string // empty when no review was posted
	Message  string
}

func (e *ExitError) Error() string { return e.Message }

// ResultText is the tool result text the model sees: "Error: <message>".
func (e *ExitError) ResultText() string { return "Error: " + e.Message }

// ExitResult is an exit_plan_mode call that completed (not an error).
type ExitResult struct {
	// Approved is the tool's {approved} output: true after an approval (the manager records a
	// silent exit applied at the next step boundary), false after a dismissal.
	Approved bool
	// ConcludeTurn: the reviewer dismissed the review to speak instead; the agent must end its
	// turn after this tool batch (plan mode stays on until the user's next message).
	ConcludeTurn bool
	// ReviewID names the review that was decided.
	ReviewID string
	// Text is the tool result text (isError false).
	Text string
}

// ExitPlanMode runs exit_plan_mode for the open turn: it admits the call only while the
// committed plan state (the log's fold) is active, checks the plan's "# " heading, posts the
// plan for review as status.agent.review with a fresh id, and waits up to timeout for the
// manager's answer in status.review. Approve and Dismiss return an ExitResult; keep-planning,
// expiry, refusal, a review nobody opened within ReviewOpenWait and the caller's timeout
// return an *ExitError with the text for the model. Other errors (log store unreachable, no
// open turn) are the agent's own failures.
func (c *Client) ExitPlanMode(ctx context.Context, plan string, timeout time.Duration) (ExitResult, error) {
	t, err := c.store.Tail(ctx, c.sessionID)
	if err != nil {
		return ExitResult{}, fmt.Errorf("exit_plan_mode: read log tail: %w", err)
	}
	if !t.TurnOpen {
		return ExitResult{}, fmt.Errorf("exit_plan_mode: no open turn in session %q; tools run inside a step", c.sessionID)
	}
	if !t.Active {
		return ExitResult{}, &ExitError{Code: ExitUnknownTool, Message: UnknownToolMessage}
	}
	if !planmode.ValidPlan(plan) {
		return ExitResult{}, &ExitError{Code: ExitInvalidPlan, Message: harness.ExitErrNoHeading}
	}
	id := NewID()
	now := metav1.NewTime(time.Now())
	req := v1alpha1.PlanReviewRequest{ID: id, Plan: plan, Turn: t.Turn, RequestedAt: &now}
	open := min(ReviewOpenWait, timeout)
	octx, cancel := context.WithTimeout(ctx, open)
	defer cancel()
	if err := c.post(octx, req); err != nil {
		if octx.Err() == nil || ctx.Err() != nil {
			return ExitResult{}, fmt.Errorf("exit_plan_mode: post the plan for review: %w", err)
		}
		return c.noChannel(ctx, id, fmt.Errorf("the API server did not take the plan within %s: %w", open, err))
	}
	if !c.awaitOpen(octx, id) {
		if err := ctx.Err(); err != nil {
			return ExitResult{}, err
		}
		return c.noChannel(ctx, id, fmt.Errorf("the manager did not open the review within %s", open))
	}
	return c.awaitReview(ctx, id, timeout)
}

// post writes status.agent.review, sent again while the API server answers 5xx or 429 (as a
// boundary report is) until ctx ends.
func (c *Client) post(ctx context.Context, req v1alpha1.PlanReviewRequest) error {
	return apiretry.Until(ctx, reportRetryDelay, reportRetryDelayMax, func() error { return c.patchAgent(ctx, map[string]any{agentFieldReview: req}) },
		func(err error, pause time.Duration) {
			c.log.V(1).Info("the API server did not take the plan review; sending it again", "reviewID", req.ID, "after", pause, "error", err.Error())
		})
}

// awaitOpen waits until status.review names review id (open, or already decided).
func (c *Client) awaitOpen(ctx context.Context, id string) bool {
	for {
		s, changed := c.snapshot()
		if s != nil && s.Status.Review != nil && s.Status.Review.ID == id {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}

// noChannel ends a call whose review nobody can answer: the post is withdrawn (best effort,
// bounded) and the model gets the harness's no-channel text.
func (c *Client) noChannel(ctx context.Context, id string, why error) (ExitResult, error) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReviewOpenWait)
	defer cancel()
	if err := c.withdrawReview(wctx, id); err != nil {
		c.log.Error(err, "withdraw a plan review nobody opened", "reviewID", id)
	}
	c.log.Info("exit_plan_mode: no reviewer can be reached", "reviewID", id, "reason", why.Error())
	return ExitResult{}, &ExitError{Code: ExitNoChannel, ReviewID: id, Message: harness.ExitErrNoChannel}
}

// awaitReview waits for status.review to close review id.
func (c *Client) awaitReview(ctx context.Context, id string, timeout time.Duration) (ExitResult, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		s, changed := c.snapshot()
		if s == nil {
			return ExitResult{}, ErrSessionNotFound
		}
		if rs := s.Status.Review; rs != nil && rs.ID == id && rs.Phase != v1alpha1.ReviewPending {
			return reviewOutcome(rs)
		}
		select {
		case <-changed:
		case <-wctx.Done():
			// Nobody may approve a plan the agent no longer waits for: withdraw it (the
			// webhook then refuses a decision naming it), best effort.
			wctx2, cancel2 := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			werr := c.withdrawReview(wctx2, id)
			cancel2()
			if werr != nil {
				c.log.Error(werr, "withdraw the plan review after the wait ended", "reviewID", id)
			}
			if s, _ := c.snapshot(); s != nil {
				if rs := s.Status.Review; rs != nil && rs.ID == id && rs.Phase != v1alpha1.ReviewPending {
					return reviewOutcome(rs) // answered just in time
				}
			}
			return ExitResult{}, &ExitError{Code: ExitAborted, ReviewID: id, Message: harness.ExitErrAborted}
		}
	}
}

// withdrawReview clears status.agent.review if it still names id.
func (c *Client) withdrawReview(ctx context.Context, id string) error {
	if s, _ := c.snapshot(); s == nil || s.Status.Agent == nil || s.Status.Agent.Review == nil || s.Status.Agent.Review.ID != id {
		return nil
	}
	return c.patchAgent(ctx, map[string]any{agentFieldReview: nil})
}

func reviewOutcome(rs *v1alpha1.ReviewStatus) (ExitResult, error) {
	switch rs.Phase {
	case v1alpha1.ReviewApproved:
		return ExitResult{Approved: true, ReviewID: rs.ID, Text: orText(rs.Message, harness.ExitApprovedText)}, nil
	case v1alpha1.ReviewDismissed:
		return ExitResult{Approved: false, ConcludeTurn: true, ReviewID: rs.ID, Text: orText(rs.Message, harness.ExitErrDismissed)}, nil
	case v1alpha1.ReviewKeptPlanning:
		return ExitResult{}, &ExitError{Code: ExitKeepPlanning, ReviewID: rs.ID, Message: orText(rs.Message, harness.ExitKeepPlanningGeneric)}
	case v1alpha1.ReviewExpired:
		return ExitResult{}, &ExitError{Code: ExitExpired, ReviewID: rs.ID, Message: orText(rs.Message, harness.ExitErrReviewExpired)}
	case v1alpha1.ReviewRejected:
		return ExitResult{}, &ExitError{Code: ExitRejected, ReviewID: rs.ID, Message: orText(rs.Message, harness.ExitErrNotInPlanMode)}
	}
	return ExitResult{}, fmt.Errorf("exit_plan_mode: review %s ended in unknown phase %q", rs.ID, rs.Phase)
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ExitToolEvents are the tool/call and tool/result events of an exit_plan_mode call with the
// outcome of ExitPlanMode (err an *ExitError, or nil with res), for the agent to append.
func ExitToolEvents(turn, step int64, callID, arguments string, res ExitResult, err error) ([]harness.Event, error) {
	call := ToolCall(turn, step, callID, harness.ExitToolName, arguments)
	var ee *ExitError
	switch {
	case errors.As(err, &ee):
		return []harness.Event{call, ToolResult(turn, step, callID, harness.ExitToolName, ee.ResultText(), true)}, nil
	case err != nil:
		return nil, err
	}
	return []harness.Event{call, ToolResult(turn, step, callID, harness.ExitToolName, res.Text, false)}, nil
}

// withdrawStaleReview clears a plan review a previous agent process posted and that is still
// undecided: no exit_plan_mode call of this process waits for it, so an approval must not be
// able to take the session out of plan mode behind the new process's back.
func (c *Client) withdrawStaleReview(ctx context.Context) error {
	s, _ := c.snapshot()
	if s == nil || s.Status.Agent == nil || s.Status.Agent.Review == nil {
		return nil
	}
	id := s.Status.Agent.Review.ID
	if rs := s.Status.Review; rs != nil && rs.ID == id && rs.Phase != v1alpha1.ReviewPending {
		return nil // already decided: the record stays
	}
	if err := c.patchAgent(ctx, map[string]any{agentFieldReview: nil}); err != nil {
		return fmt.Errorf("agentsdk: withdraw the plan review %s left by a previous agent process: %w", id, err)
	}
	c.log.Info("withdrew an undecided plan review left by a previous agent process", "reviewID", id)
	return nil
}
