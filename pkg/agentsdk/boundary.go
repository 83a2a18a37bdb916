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
)

// Errors a Boundary call can return. Every one of them fails the step proposal: the agent must
// not build the step's request; the reference agent ends the turn with turn/end {blocked}.
var (
	// ErrProposalFailed: the manager answered the boundary with result Failed (for example the
	// plan/mode append failed); the selection stays pending. Use errors.As with
	// *ProposalFailedError for the manager's message.
	ErrProposalFailed = errors.New("step proposal failed")
	// ErrTimeout: no acknowledgement within the caller's timeout.
	ErrTimeout = errors.New("timed out waiting for the manager to acknowledge the step boundary")
	// ErrInvalidBoundary: the caller proposed a step the log does not allow (no open turn, or
	// another turn number than the open one). Nothing was written.
	ErrInvalidBoundary = errors.New("invalid step boundary")
	// ErrConfigMissing: plan mode is committed but the PlanModeConfig in force does not exist,
	// so the step cannot carry its guidance.
	ErrConfigMissing = errors.New("plan mode config not found")
	// ErrSessionNotFound: the AgentSession does not exist (or was deleted).
	ErrSessionNotFound = errors.New("AgentSession not found")
)

// ProposalFailedError carries the manager's message for a Failed acknowledgement.
type ProposalFailedError struct {
	Turn, Step, Seq int64
	Message         string
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
	// Steer is a user message sent through spec.steer (kubectl plan message) that this session
	// has not recorded yet; StartStep records it as the step's last input before the notice.
	Steer *v1alpha1.SteerMessage
	// Asked tells whether the SDK wrote a boundary report and waited for the manager.
	Asked bool
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

// Boundary runs the agent side of the step-boundary protocol for step `step` of the open turn
// `turn`. Call it after the step claimed its input (turn/start, or the previous step/end) and
// before building the step's request; never for a request-recovery retry.
//
// When nothing is pending it reads the log tail once and makes no API call. Otherwise it writes
// status.agent.boundary = {turn, step, seq} (field manager planmode-agent, status subresource,
// only status.agent) and waits up to timeout for status.planMode.lastBoundary to answer the same
// (turn, step, seq). Any error fails the step proposal; a report the API server could not take
// (5xx, 429) is first sent again until timeout.
func (c *Client) Boundary(ctx context.Context, turn, step int64, timeout time.Duration) (Result, error) {
	t, err := c.proposalTail(ctx, turn, step)
	if err != nil {
		return Result{}, err
	}
	s, err := c.sessionOfThisLog()
	if err != nil {
		return Result{}, err
	}
	seq := t.NextSeq
	if b := statusBoundary(s); b != nil && b.Turn == turn && b.Step == step && b.Seq == t.NextSeq-1 && t.LastPlanModeSeq == b.Seq {
		// Our earlier report for this step (a call that timed out) has been acted on: the
		// manager appended plan/mode at its seq and its answer is on the way. Wait for that
		// answer instead of reporting the moved tail.
		seq = b.Seq
	}
	switch ack := s.Status.PlanMode.LastBoundary; {
	case answers(ack, turn, step, seq):
		// Already answered (an earlier call timed out just before the ack arrived).
		return c.fromAck(s, ack)
	case seq == t.NextSeq && !mustAsk(s, t):
		return c.withoutAsking(s, t, turn, step)
	}
	return c.ask(ctx, s, turn, step, seq, timeout)
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

// withoutAsking answers a boundary the manager need not be asked about: from the log tail t,
// the status's notice and the manager's late answer to this step, if any.
func (c *Client) withoutAsking(s *v1alpha1.AgentSession, t harness.Tail, turn, step int64) (Result, error) {
	pm := &s.Status.PlanMode
	if ack := pm.LastBoundary; ack != nil && ack.Turn == turn && ack.Step == step && ack.Result == v1alpha1.BoundaryAdmitted &&
		ack.NextSeq == t.NextSeq && ack.Seq < t.NextSeq {
		// A late answer to this very step after our timeout: the manager appended
		// plan/mode at ack.Seq; its notice is still owed.
		return c.fromAck(s, ack)
	}
	res := Result{Turn: turn, Step: step, Active: t.Active, NextSeq: t.NextSeq}
	if n := pm.Notice; n != nil && n.Seq == t.LastPlanModeSeq && t.LastPlanModeSeq > t.LastStepStartSeq {
		res.Notice = n.Text
	}
	return c.withSection(s, res)
}

func (c *Client) ask(ctx context.Context, s *v1alpha1.AgentSession, turn, step, seq int64, timeout time.Duration) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timedOut := func(err error) error {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w (turn %d, step %d, seq %d, after %s)", ErrTimeout, turn, step, seq, timeout)
		}
		return err
	}
	if b := statusBoundary(s); b == nil || b.Turn != turn || b.Step != step || b.Seq != seq {
		if err := c.report(ctx, turn, step, seq); err != nil {
			return Result{}, timedOut(fmt.Errorf("step boundary (turn %d, step %d): report: %w", turn, step, err))
		}
	}
	for {
		s, changed := c.snapshot()
		if s == nil {
			return Result{}, ErrSessionNotFound
		}
		if ack := s.Status.PlanMode.LastBoundary; answers(ack, turn, step, seq) {
			res, err := c.fromAck(s, ack)
			res.Asked = true
			return res, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Result{}, timedOut(ctx.Err())
		}
	}
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
	fields := map[string]any{agentFieldBoundary: v1alpha1.StepBoundary{Turn: turn, Step: step, Seq: seq, Time: &now}}
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
	obj := &v1alpha1.AgentSession{}
	obj.Namespace, obj.Name = c.ns, c.name
	return c.writer.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(c.fieldManager))
}

func (c *Client) fromAck(s *v1alpha1.AgentSession, ack *v1alpha1.BoundaryAck) (Result, error) {
	if ack.Result != v1alpha1.BoundaryAdmitted {
		msg := ack.Message
		if msg == "" {
			msg = "the manager gave no reason (result " + string(ack.Result) + ")"
		}
		return Result{}, &ProposalFailedError{Turn: ack.Turn, Step: ack.Step, Seq: ack.Seq, Message: msg}
	}
	c.next = ack.NextSeq
	return c.withSection(s, Result{Turn: ack.Turn, Step: ack.Step, Active: ack.Active, Notice: ack.Notice, NextSeq: ack.NextSeq})
}

func (c *Client) withSection(s *v1alpha1.AgentSession, res Result) (Result, error) {
	res.ExitAdmitted = res.Active
	if st := s.Spec.Steer; st != nil && st.ID != c.steerDone && (s.Status.Agent == nil || s.Status.Agent.SteerID != st.ID) {
		res.Steer = st.DeepCopy()
	}
	name, text, ok := c.section(s)
	res.ConfigName = name
	if !res.Active {
		return res, nil
	}
	if !ok {
		return Result{}, fmt.Errorf("%w: plan mode is on but PlanModeConfig %s/%s does not exist; create it or point spec.planMode.configRef at one",
			ErrConfigMissing, c.ns, name)
	}
	res.Section = text
	return res, nil
}
