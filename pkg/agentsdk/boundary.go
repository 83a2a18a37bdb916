package agentsdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/apiretry"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// DefaultBoundaryWait is how long a step boundary waits for the manager's answer when the
// caller names no bound (Options.BoundaryWait, Boundary's wait). Protocol v2: without an answer
// by then the step goes on under the committed state, and the selection applies at a later
// boundary.
const DefaultBoundaryWait = 2 * time.Second

// Errors a Boundary call can return. Every one of them fails the step proposal: the agent must
// not build the step's request; the reference agent ends the turn with turn/end {blocked}. None
// of them means "the manager did not answer": that is no failure in protocol v2.
var (
	// ErrProposalFailed: the manager answered the boundary report Failed: the report does not
	// match a live turn of the log, or the manager could not append the selection (protocol
	// v3; the selection stays pending). Use errors.As with *ProposalFailedError for its
	// message and reason.
	ErrProposalFailed = errors.New("step proposal failed")
	// ErrInvalidBoundary: the caller proposed a step the log does not allow (no open turn, or
	// another turn number than the open one). Nothing was written.
	ErrInvalidBoundary = errors.New("invalid step boundary")
	// ErrSessionNotFound: the AgentSession does not exist (or was deleted).
	ErrSessionNotFound = errors.New("AgentSession not found")
)

// ProposalFailedError carries the manager's reason and message for a Failed acknowledgement.
type ProposalFailedError struct {
	Turn, Step, Seq int64
	// Reason is the answer's reason (v1alpha1.ReasonInvalidBoundary, ReasonLogStoreError, ...).
	Reason  string
	Message string
}

func (e *ProposalFailedError) Error() string {
	return fmt.Sprintf("step proposal (turn %d, step %d, seq %d) failed: %s", e.Turn, e.Step, e.Seq, e.Message)
}

// Is makes errors.Is(err, ErrProposalFailed) true.
func (e *ProposalFailedError) Is(target error) bool { return target == ErrProposalFailed }

// Result is what a step uses, decided at its boundary.
type Result struct {
	// Turn and Step of the admitted step.
	Turn, Step int64
	// Active is the committed plan state the step's request must reflect.
	Active bool
	// ExitAdmitted: exit_plan_mode may be declared and called in this step (Active).
	ExitAdmitted bool
	// Section is the plan guidance (PlanModeConfig spec.section, exact text) when Active,
	// empty otherwise. ConfigName names the PlanModeConfig it came from.
	Section    string
	ConfigName string
	// Notice, when not empty, is the text of the plugin notice to record as the last
	// user/message of this step (Notice(text)).
	Notice string
	// NextSeq is where the step's step/start goes.
	NextSeq int64
	// Messages are the user messages (kubectl plan message: spec.steerQueue) this session has
	// not recorded yet, oldest first; StartStep records them as the step's last input, before
	// the notice.
	Messages []v1alpha1.SteerMessage
	// Asked tells whether the SDK wrote a boundary report and waited for the manager.
	Asked bool
	// Unanswered: the SDK asked, but the manager did not answer within the wait (or dismissed
	// the report as one the log moved past): the step runs under the committed state and the
	// selection stays pending for a later boundary (protocol v2).
	Unanswered bool
	// Adopted: the step's first step/start lost the race for its seq to the manager's
	// plan/mode, answering this step's report after the SDK stopped waiting; the step takes
	// that plan/mode and its notice (protocol v2).
	Adopted bool
	// GuidanceMissing: plan mode is on but the PlanModeConfig in force does not exist. Section
	// is then the last text this client saw for it, or empty if it saw none; the step still
	// runs in plan mode (exit_plan_mode declared).
	GuidanceMissing bool
}

// mustAsk is the protocol's condition for asking the manager (docs/protocol.md, "When to
// ask"): a pending selection, a selection the manager has not taken on yet, or a plan/mode the
// status does not cover yet (a commit whose notice the status may not carry yet).
func mustAsk(s *v1alpha1.AgentSession, t harness.Tail) bool {
	pm := &s.Status.PlanMode
	if pm.Pending {
		return true
	}
	if x := s.Spec.PlanMode.Active; x != nil && (pm.Selection == nil || *pm.Selection != *x) {
		return true
	}
	return t.LastPlanModeSeq > t.LastStepStartSeq && pm.NextSeq <= t.LastPlanModeSeq
}

// WouldAsk reports whether a boundary now would ask the manager (an API write and a wait).
// Benchmarks and tests use it to know a toggle has reached the agent's watch.
func (c *Client) WouldAsk(ctx context.Context) (bool, error) {
	s, _ := c.snapshot()
	if s == nil {
		return false, ErrSessionNotFound
	}
	t, err := c.store.Tail(ctx, c.sessionID)
	if err != nil {
		return false, err
	}
	return mustAsk(s, t), nil
}

func answers(ack *v1alpha1.BoundaryAck, turn, step, seq int64) bool {
	return ack != nil && ack.Turn == turn && ack.Step == step && ack.Seq == seq
}

// Boundary runs the agent side of the step-boundary protocol (v2) for step `step` of the open
// turn `turn`. Call it after the step claimed its input (turn/start, or the previous step/end)
// and before building the step's request; never for a request-recovery retry.
//
// When nothing is pending it reads the log tail once and makes no API call. Otherwise it writes
// status.agent.boundary = {turn, step, seq} (field manager planmode-agent, status subresource,
// only status.agent) and waits at most `wait` (<= 0: Options.BoundaryWait) for
// status.planMode.lastBoundary to answer the same (turn, step, seq). Without an answer by then
// the step proceeds under the committed state (Result.Unanswered) and the selection stays
// pending: a step never waits on the manager longer than the wait. If the manager's plan/mode
// then wins the race for the seq, StartStep reports ErrLogChanged and the next Boundary call
// for the same step takes that plan/mode and its notice at once (Result.Adopted), without
// waiting again.
func (c *Client) Boundary(ctx context.Context, turn, step int64, wait time.Duration) (Result, error) {
	if wait <= 0 {
		wait = c.boundaryWait
	}
	t, err := c.proposalTail(ctx, turn, step)
	if err != nil {
		return Result{}, err
	}
	s, err := c.sessionOfThisLog()
	if err != nil {
		return Result{}, err
	}
	ack := s.Status.PlanMode.LastBoundary
	if b := c.lastReport(s); b != nil && b.Turn == turn && b.Step == step && b.Seq == t.NextSeq-1 && t.LastPlanModeSeq == b.Seq {
		// Our report for this step was acted on after we stopped waiting: the manager's
		// plan/mode took its seq. Take it, with its answer when it has arrived, else with the
		// notice the log and the status say it owes.
		if answers(ack, turn, step, b.Seq) && ack.Result == v1alpha1.BoundaryAdmitted {
			res, err := c.fromAck(s, ack)
			res.Adopted = true
			return res, err
		}
		res, err := c.withoutAsking(s, t, turn, step)
		res.Adopted = true
		return res, err
	}
	if answers(ack, turn, step, t.NextSeq) {
		// Already answered (an earlier call stopped waiting just before the answer arrived).
		return c.answered(s, t, ack)
	}
	if !mustAsk(s, t) {
		return c.withoutAsking(s, t, turn, step)
	}
	return c.ask(ctx, s, t, turn, step, wait)
}

// proposalTail reads the log tail for a boundary of step `step` of turn `turn` and checks the
// log allows that step: the turn is the open one and no step is open.
func (c *Client) proposalTail(ctx context.Context, turn, step int64) (harness.Tail, error) {
	t, err := c.store.Tail(ctx, c.sessionID)
	if err != nil {
		return harness.Tail{}, fmt.Errorf("step boundary (turn %d, step %d): read log tail: %w", turn, step, err)
	}
	c.next = t.NextSeq
	if !t.TurnOpen || t.Turn != turn || step < 1 {
		return harness.Tail{}, fmt.Errorf("%w: turn %d step %d proposed, but the log's open turn is %d (open: %v); append turn/start first and number steps from 1",
			ErrInvalidBoundary, turn, step, t.Turn, t.TurnOpen)
	}
	if t.StepOpen {
		return harness.Tail{}, fmt.Errorf("%w: step %d of turn %d is still open; append its step/end before the next boundary", ErrInvalidBoundary, t.Step, turn)
	}
	return t, nil
}

// sessionOfThisLog is the watched AgentSession, as long as it still names this client's log.
func (c *Client) sessionOfThisLog() (*v1alpha1.AgentSession, error) {
	s, _ := c.snapshot()
	if s == nil {
		return nil, ErrSessionNotFound
	}
	if s.Spec.SessionID != c.sessionID {
		// Deleted and recreated for another log: this client's log position means nothing there.
		return nil, fmt.Errorf("%w: AgentSession %s/%s now names session %q, this client serves %q; restart the agent",
			ErrSessionNotFound, c.ns, c.name, s.Spec.SessionID, c.sessionID)
	}
	return s, nil
}

// withoutAsking answers a boundary from the log tail t and the status alone: the committed
// state, and the notice owed by a plan/mode no step has started after yet.
func (c *Client) withoutAsking(s *v1alpha1.AgentSession, t harness.Tail, turn, step int64) (Result, error) {
	return c.withSection(s, Result{Turn: turn, Step: step, Active: t.Active, NextSeq: t.NextSeq, Notice: owedNotice(s, t)})
}

// owedNotice is the notice the first step after the log's last plan/mode records: the one the
// status publishes for it, or, when the status does not cover that plan/mode yet (its answer
// is not here), the harness's rule applied to the log: a user selection is narrated iff the
// last request/header described the other state; an approved exit never is.
func owedNotice(s *v1alpha1.AgentSession, t harness.Tail) string {
	if t.LastPlanModeSeq < 0 || t.LastPlanModeSeq < t.LastStepStartSeq {
		return ""
	}
	pm := &s.Status.PlanMode
	if n := pm.Notice; n != nil && n.Seq == t.LastPlanModeSeq {
		return n.Text
	}
	if pm.NextSeq > t.LastPlanModeSeq {
		return "" // the status covers it and owes nothing
	}
	if pm.PendingSource == v1alpha1.PendingSourceExit && pm.PendingActive != nil && *pm.PendingActive == t.Active {
		return ""
	}
	return planmode.Narration(t.LastShown, t.Active)
}

// ask reports the boundary and waits at most wait for its answer. Without one (or with one
// dismissing the report) the step proceeds under the committed state in t.
func (c *Client) ask(ctx context.Context, s *v1alpha1.AgentSession, t harness.Tail, turn, step int64, wait time.Duration) (Result, error) {
	seq := t.NextSeq
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	unanswered := func(s *v1alpha1.AgentSession) (Result, error) {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		res, err := c.withoutAsking(s, t, turn, step)
		res.Asked, res.Unanswered = true, true
		return res, err
	}
	if b := c.lastReport(s); b == nil || b.Turn != turn || b.Step != step || b.Seq != seq {
		if err := c.report(wctx, turn, step, seq); err != nil {
			if wctx.Err() != nil {
				return unanswered(s) // the API server did not take the report in time
			}
			return Result{}, fmt.Errorf("step boundary (turn %d, step %d): report: %w", turn, step, err)
		}
	}
	for {
		cur, changed := c.snapshot()
		if cur == nil {
			return Result{}, ErrSessionNotFound
		}
		if ack := cur.Status.PlanMode.LastBoundary; answers(ack, turn, step, seq) {
			res, err := c.answered(cur, t, ack)
			res.Asked = true
			return res, err
		}
		select {
		case <-changed:
		case <-wctx.Done():
			return unanswered(cur)
		}
	}
}

// answered turns the manager's answer to this step's report into the step's result: Admitted
// is taken as it is; Dismissed (the log moved past the report) leaves the step under the
// committed state in t; Failed fails the proposal, whatever its reason (protocol v3: an
// append the manager reports as failed fails the proposal, and the selection stays pending).
func (c *Client) answered(s *v1alpha1.AgentSession, t harness.Tail, ack *v1alpha1.BoundaryAck) (Result, error) {
	if ack.Result == v1alpha1.BoundaryDismissed {
		res, err := c.withoutAsking(s, t, ack.Turn, ack.Step)
		res.Unanswered = true
		return res, err
	}
	return c.fromAck(s, ack)
}

// lastReport is the boundary this session last reported: this process's own last report
// (the watch may not show it yet), else the one in the status (an earlier process's).
func (c *Client) lastReport(s *v1alpha1.AgentSession) *v1alpha1.StepBoundary {
	if c.reported != nil {
		return c.reported
	}
	return statusBoundary(s)
}

func statusBoundary(s *v1alpha1.AgentSession) *v1alpha1.StepBoundary {
	if s.Status.Agent == nil {
		return nil
	}
	return s.Status.Agent.Boundary
}

// First and longest pause before a boundary report the API server did not take is sent again.
const (
	reportRetryDelay    = 100 * time.Millisecond
	reportRetryDelayMax = 5 * time.Second
)

// report writes status.agent.boundary with a JSON merge patch on the status subresource: it
// touches status.agent.boundary only, needs no resourceVersion (no conflicts), and is one write.
//
// An API server too busy to finish the write in time answers 504 (or 429, or drops the
// connection), as many do when thousands of agents reach a boundary at once. The same patch
// (same boundary, same time) is then sent again, with growing pauses, until ctx (the caller's
// acknowledgement timeout) ends: it is idempotent, so one that did land meanwhile changes
// nothing. Any other refusal fails the step at once.
func (c *Client) report(ctx context.Context, turn, step, seq int64) error {
	now := metav1.NewTime(time.Now())
	b := v1alpha1.StepBoundary{Turn: turn, Step: step, Seq: seq, Time: &now}
	fields := map[string]any{agentFieldBoundary: b}
	// Remembered before it is sent: a report that may have landed is one the manager may act on.
	c.reported = &b
	return apiretry.Until(ctx, reportRetryDelay, reportRetryDelayMax, func() error { return c.patchAgent(ctx, fields) },
		func(err error, pause time.Duration) {
			c.log.V(1).Info("the API server did not take the boundary report; sending it again", "turn", turn, "step", step, "after", pause, "error", err.Error())
		})
}

// The status.agent fields the agent writes, by their JSON names.
const (
	agentFieldBoundary = "boundary"
	agentFieldSteerID  = "steerID"
	agentFieldReview   = "review"
)

// patchAgent merge-patches fields of status.agent (and nothing else) as the agent.
func (c *Client) patchAgent(ctx context.Context, fields map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": map[string]any{"agent": fields}})
	if err != nil {
		return err
	}
	// The answer is read as metadata: the agent reads the session from its watch.
	return c.writer.Status().Patch(ctx, v1alpha1.AgentSessionMetadata(c.ns, c.name), client.RawPatch(types.MergePatchType, body), client.FieldOwner(c.fieldManager))
}

func (c *Client) fromAck(s *v1alpha1.AgentSession, ack *v1alpha1.BoundaryAck) (Result, error) {
	if ack.Result != v1alpha1.BoundaryAdmitted {
		msg := ack.Message
		if msg == "" {
			msg = "the manager gave no reason (result " + string(ack.Result) + ")"
		}
		return Result{}, &ProposalFailedError{Turn: ack.Turn, Step: ack.Step, Seq: ack.Seq, Reason: ack.Reason, Message: msg}
	}
	c.next = ack.NextSeq
	return c.withSection(s, Result{Turn: ack.Turn, Step: ack.Step, Active: ack.Active, Notice: ack.Notice, NextSeq: ack.NextSeq})
}

func (c *Client) withSection(s *v1alpha1.AgentSession, res Result) (Result, error) {
	res.ExitAdmitted = res.Active
	res.Messages = c.undelivered(s)
	name, text, ok := c.section(s)
	res.ConfigName = name
	if !res.Active {
		return res, nil
	}
	// Plan mode is soft guidance: a missing config never blocks the step. It gets the last
	// text this client saw for the config (empty if none) and says so.
	res.Section, res.GuidanceMissing = text, !ok
	return res, nil
}

// undelivered is the user messages this session has not recorded, oldest first: the queue's
// entries after the last one recorded (this process's own record first, it may be ahead of
// status.agent.steerID; an id no longer in the queue was delivered and dropped by a writer).
func (c *Client) undelivered(s *v1alpha1.AgentSession) []v1alpha1.SteerMessage {
	acked := ""
	if s.Status.Agent != nil {
		acked = s.Status.Agent.SteerID
	}
	q := s.Spec.SteerQueue
	from := 0
	for _, id := range []string{c.steerDone, acked} {
		if i := steerIndex(q, id); i >= 0 {
			from = i + 1
			break
		}
	}
	return append([]v1alpha1.SteerMessage(nil), q[from:]...)
}

func steerIndex(q []v1alpha1.SteerMessage, id string) int {
	if id == "" {
		return -1
	}
	for i := range q {
		if q[i].ID == id {
			return i
		}
	}
	return -1
}

// PendingMessages returns the user messages the session has not recorded yet (oldest first).
// An idle agent starts a turn with them (the reference agent's WaitForMessages).
func (c *Client) PendingMessages() []v1alpha1.SteerMessage {
	s, _ := c.snapshot()
	if s == nil {
		return nil
	}
	return c.undelivered(s)
}

// MessagesChanged returns a channel closed at the next change of the watched session, to wait
// for messages without polling.
func (c *Client) MessagesChanged() <-chan struct{} {
	_, ch := c.snapshot()
	return ch
}
