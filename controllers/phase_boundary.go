package controllers

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
)

// The first words of a Failed answer's message, kept for people reading it; programs read the
// answer's reason.
const (
	invalidBoundaryMsgPrefix = "invalid boundary report: "
	storeFailureMsgPrefix    = "log store: "
	storeFailureMsgSuffix    = "; the selection stays pending for the next boundary"
)

// answerBoundary answers the step boundary in status.agent.boundary, once: it appends a
// pending selection at the reported seq (before the step's request is built) and admits the
// step, or refuses a report that does not match the log. With no report to answer, a refusal
// it answered earlier is reported again while it stands (standingRefusal).
func (sc *sessionScope) answerBoundary(ctx context.Context) (ctrl.Result, error) {
	b := unanswered(sc.session)
	if b == nil {
		return ctrl.Result{}, sc.standingRefusal()
	}
	t := sc.tail
	if passed := sc.supersededBoundary(b); passed != nil {
		// Protocol v2: the agent stopped waiting and went on under the committed state; the
		// log has moved past its report. Nothing is wrong: the selection stays pending for a
		// later boundary, and the report is answered so no one waits on it.
		ack := sc.ack(b, agentsv1alpha1.BoundaryDismissed, t.Active, t.NextSeq)
		ack.Reason, ack.Message = agentsv1alpha1.ReasonSuperseded, passed.Error()
		sc.planMode.LastBoundary = ack
		logf.FromContext(ctx).V(1).Info("dismissed a boundary report the log has moved past", "turn", b.Turn, "step", b.Step, "seq", b.Seq, "nextSeq", t.NextSeq)
		return ctrl.Result{}, nil
	}
	if refusal := sc.checkBoundary(b); refusal != nil {
		ack := sc.ack(b, agentsv1alpha1.BoundaryFailed, t.Active, t.NextSeq)
		ack.Reason, ack.Message = agentsv1alpha1.ReasonInvalidBoundary, invalidBoundaryMsgPrefix+refusal.Error()
		sc.planMode.LastBoundary = ack
		logf.FromContext(ctx).Info("refused an invalid step-boundary report", "turn", b.Turn, "step", b.Step, "seq", b.Seq, "reason", refusal.Error())
		return ctrl.Result{}, sc.standingRefusal()
	}
	if b.Seq == t.NextSeq-1 {
		// Our plan/mode at b.seq, appended for this very boundary by a reconcile that did not
		// get to write the answer: answer it without appending again.
		sc.admit(b, t.Active, t.NextSeq, sc.owedNoticeAt(b.Seq))
		if p := sc.planMode.PendingActive; p != nil && *p == t.Active {
			sc.setPending(nil)
		}
		return ctrl.Result{}, nil
	}
	d := sc.boundaryDecision()
	if d.Append == nil {
		if d.ClearPending {
			sc.setPending(nil)
		}
		sc.admit(b, t.Active, t.NextSeq, sc.owedNoticeAfter(t.LastStepStartSeq))
		return ctrl.Result{}, nil
	}
	if err := sc.appendPlanMode(ctx, b.Seq, *d.Append); err != nil {
		return ctrl.Result{}, err // a store failure answers the boundary Failed (failures.go)
	}
	sc.setPending(nil)
	sc.setOwedNotice(d.Notice) // at b.seq: the admitted step records it (the answer carries it)
	sc.admit(b, sc.tail.Active, sc.tail.NextSeq, d.Notice)
	return ctrl.Result{}, nil
}

// boundaryDecision is the harness's flush at a step boundary, with the two cases in which the
// selection waits for a later boundary instead.
func (sc *sessionScope) boundaryDecision() planmode.FlushDecision {
	t := sc.tail
	d := planmode.Flush(sc.state())
	switch {
	case d.Append != nil && *d.Append && sc.entryWaitsForConfig():
		return planmode.FlushDecision{Active: t.Active} // the entry waits for its config
	case d.Append != nil && t.Step >= 1 && t.LastPlanModeSeq > t.LastStepStartSeq:
		// A plan/mode already landed at this boundary and no step started since (only an
		// agent that broke the protocol gets here): a second one would leave two at one
		// boundary. Admit the step with the logged state; the selection waits for the next.
		return planmode.FlushDecision{Active: t.Active}
	}
	return d
}

func answered(ack *agentsv1alpha1.BoundaryAck, b *agentsv1alpha1.StepBoundary) bool {
	return ack != nil && ack.Turn == b.Turn && ack.Step == b.Step && ack.Seq == b.Seq
}

// supersededBoundary returns why a report is one the log has moved past, nil when it is not: its
// turn has ended, or events were appended at and after its seq that are not the plan/mode
// answering it (protocol v2: an agent that got no answer in time starts its step under the
// committed state, so such a report is normal after a manager outage and needs no one).
func (sc *sessionScope) supersededBoundary(b *agentsv1alpha1.StepBoundary) error {
	t := sc.tail
	switch {
	case b.Turn < t.Turn || b.Turn == t.Turn && !t.TurnOpen:
		return fmt.Errorf("turn %d has ended since this boundary was reported; the selection stays pending for a later boundary", b.Turn)
	case b.Turn == t.Turn && b.Seq < t.NextSeq && (b.Seq != t.NextSeq-1 || t.LastPlanModeSeq != b.Seq):
		return fmt.Errorf("the log moved past seq %d (next seq %d) without waiting for an answer; the selection stays pending for a later boundary", b.Seq, t.NextSeq)
	}
	return nil
}

// checkBoundary validates a report against the log: the refusal, naming the field, or nil.
func (sc *sessionScope) checkBoundary(b *agentsv1alpha1.StepBoundary) error {
	t, last := sc.tail, sc.stored.LastBoundary
	switch {
	case !t.TurnOpen:
		return fmt.Errorf("status.agent.boundary names turn %d, but the log has no open turn (next seq %d); report a boundary only inside a turn", b.Turn, t.NextSeq)
	case b.Turn != t.Turn:
		return fmt.Errorf("status.agent.boundary.turn is %d, but the open turn in the log is %d", b.Turn, t.Turn)
	case t.StepOpen:
		return fmt.Errorf("status.agent.boundary reported while step %d is still open in the log; a boundary comes after step/end", t.Step)
	case b.Step <= t.Step:
		return fmt.Errorf("status.agent.boundary.step is %d, but step %d already started in turn %d; steps only go forward", b.Step, t.Step, t.Turn)
	case last != nil && last.Result == agentsv1alpha1.BoundaryAdmitted && last.Turn == b.Turn && last.Step == b.Step && last.Seq != b.Seq:
		return fmt.Errorf("status.agent.boundary.step %d of turn %d was already admitted at seq %d; report each step's boundary once and append its step/start at the acknowledged nextSeq",
			b.Step, b.Turn, last.Seq)
	case b.Seq == t.NextSeq:
		return nil
	case b.Seq == t.NextSeq-1 && t.LastPlanModeSeq == b.Seq && b.Seq >= sc.stored.NextSeq:
		return nil // our own unanswered plan/mode (see answerBoundary)
	case b.Seq > t.NextSeq:
		return fmt.Errorf("status.agent.boundary.seq is %d, ahead of the log's next seq %d; report the tail you read", b.Seq, t.NextSeq)
	default:
		return fmt.Errorf("status.agent.boundary.seq is %d, but the log's next seq is %d (events were appended since); read the tail again and report it", b.Seq, t.NextSeq)
	}
}

// standingRefusal is the failure of the last answer while it stands: a report refused while its
// turn is still open in the log, or one answered Failed because the log store failed while its
// selection still waits for a boundary. A report from a turn that has ended needs no one.
func (sc *sessionScope) standingRefusal() error {
	lb := sc.planMode.LastBoundary
	if lb == nil || lb.Result != agentsv1alpha1.BoundaryFailed {
		return nil
	}
	pending := sc.planMode.PendingActive != nil && *sc.planMode.PendingActive != sc.tail.Active
	switch {
	case lb.Reason == agentsv1alpha1.ReasonInvalidBoundary && sc.liveTurn(lb.Turn):
		return invalidBoundary(lb.Message)
	case lb.Reason == agentsv1alpha1.ReasonLogStoreError && pending:
		return standingStoreFailure(lb.Message)
	}
	return nil
}

func (sc *sessionScope) ack(b *agentsv1alpha1.StepBoundary, result agentsv1alpha1.BoundaryResult, active bool, next int64) *agentsv1alpha1.BoundaryAck {
	return &agentsv1alpha1.BoundaryAck{Turn: b.Turn, Step: b.Step, Seq: b.Seq, Time: sc.r.now(), Result: result, Active: active, NextSeq: next}
}

func (sc *sessionScope) admit(b *agentsv1alpha1.StepBoundary, active bool, next int64, notice string) {
	ack := sc.ack(b, agentsv1alpha1.BoundaryAdmitted, active, next)
	ack.Notice = notice
	sc.planMode.LastBoundary = ack
}

func (sc *sessionScope) owedNoticeAt(seq int64) string {
	if n := sc.planMode.Notice; n != nil && n.Seq == seq {
		return n.Text
	}
	return ""
}

func (sc *sessionScope) owedNoticeAfter(lastStepStart int64) string {
	if n := sc.planMode.Notice; n != nil && n.Seq > lastStepStart && n.Seq == sc.tail.LastPlanModeSeq {
		return n.Text
	}
	return ""
}
