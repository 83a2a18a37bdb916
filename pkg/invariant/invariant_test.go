package invariant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// logb builds a hand-made log; every helper appends at the next seq.
type logb struct {
	evs []harness.Event
	// turn and step are those of the last step/start, where a tool/result lands.
	turn, step int
}

func (b *logb) raw(typ, data string) int64 {
	seq := int64(len(b.evs))
	ev := harness.Event{Type: typ, Seq: seq, Time: 1785406805000 + seq, Data: json.RawMessage(data)}
	if typ == harness.TypeUserMessage || typ == "tool/result" {
		ev.SurfaceOp = json.RawMessage(`"append"`)
	}
	b.evs = append(b.evs, ev)
	return seq
}

func (b *logb) pm(active bool) int64 { return b.raw("plan/mode", fmt.Sprintf(`{"active":%v}`, active)) }
func (b *logb) turnStart(t int) {
	b.raw("turn/start", fmt.Sprintf(`{"turn":%d}`, t))
}
func (b *logb) turnEnd(t int) {
	b.raw("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, t))
}
func (b *logb) stepStart(t, s int) int64 {
	b.turn, b.step = t, s
	return b.raw("step/start", fmt.Sprintf(`{"turn":%d,"step":%d}`, t, s))
}
func (b *logb) stepEnd(t, s int) {
	b.raw("step/end", fmt.Sprintf(`{"turn":%d,"step":%d}`, t, s))
}
func (b *logb) user(text string) {
	b.raw("user/message", fmt.Sprintf(`{"content":[{"type":"text","text":%q}],"source":{"kind":"user"},"role":"user","id":"m%d"}`, text, len(b.evs)))
}
func (b *logb) notice(text string) int64 {
	const data = `{"content":[{"type":"text","text":%q}],"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":%q},` +
		`"role":"user","id":"n%d"}`
	return b.raw("user/message", fmt.Sprintf(data, text, text, len(b.evs)))
}
func (b *logb) header(reason string) {
	b.raw("request/header", fmt.Sprintf(`{"header":{"config":{"provider":"deepseek","model":"deepseek-v4-flash"},"system":"…"},"reason":%q}`, reason))
}

// toolResult appends a successful tool/result (isError false) for call c1 to the step last
// started, in the harness's shape: it names the call, not the tool (the tool/call does).
func (b *logb) toolResult(text string) {
	const data = `{"turn":%d,"step":%d,"message":{"source":{"kind":"tool","callId":"c1"},` +
		`"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":%q}],"isError":false}],"role":"user","id":"r1"}}`
	b.raw("tool/result", fmt.Sprintf(data, b.turn, b.step, text))
}

// legacyToolResult is toolResult in the shape earlier operator releases wrote, which names
// the tool.
func (b *logb) legacyToolResult(name, text string) {
	const data = `{"turn":%d,"step":%d,` +
		`"message":{"role":"toolResult","callId":"c1","toolName":%q,"content":[{"type":"text","text":%q}],"isError":false}}`
	b.raw("tool/result", fmt.Sprintf(data, b.turn, b.step, name, text))
}

// a completed step with a request and no notice.
func (b *logb) plainStep(t, s int) {
	b.stepStart(t, s)
	b.header("change")
	b.stepEnd(t, s)
}

func bp(v bool) *bool { return &v }

func kinds(vs []Violation) string {
	s := make([]string, 0, len(vs))
	for _, v := range vs {
		s = append(s, fmt.Sprintf("%s@%d", v.Kind, v.Seq))
	}
	return strings.Join(s, ",")
}

func expect(t *testing.T, in Input, want ...string) {
	t.Helper()
	got := Check(in)
	if kinds(got) != strings.Join(want, ",") {
		t.Fatalf("violations = [%s], want [%s]\n%s", kinds(got), strings.Join(want, ","), dump(got))
	}
	for _, v := range got {
		if v.Message == "" {
			t.Fatalf("violation %s has no message", v.Kind)
		}
	}
}

func dump(vs []Violation) string {
	s := make([]string, 0, len(vs))
	for _, v := range vs {
		s = append(s, "  "+v.String())
	}
	return strings.Join(s, "\n")
}

// An idle /plan after a request in default mode, then a prompt: the plan/mode between
// turns, the notice in the first step of the next turn (here before the prompt, as the
// harness's inbox delivers it).
func TestCleanIdleSelection(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.stepStart(1, 1)
	b.user("hello")
	b.header("initial")
	b.stepEnd(1, 1)
	b.turnEnd(1)
	b.raw("command/run", `{"commandId":"c1","name":"plan","args":"","source":{"kind":"user"}}`)
	b.pm(true)
	b.raw("agent/inbox/spliced", `{"target":"next-step","start":0,"inserted":[{"content":[{"type":"text","text":"The user switched this session to plan mode."}],`+
		`"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"The user switched this session to plan mode."},"role":"user","id":"n1"}]}`)
	b.raw("command/done", `{"commandId":"c1","kind":"success","text":"Plan mode on. Use /plan off to leave."}`)
	b.turnStart(2)
	b.stepStart(2, 1)
	b.notice(harness.NoticePlanOn)
	b.user("explore")
	b.header("change")
	b.stepEnd(2, 1)
	b.turnEnd(2)
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(true), TakenOn: bp(true)}})
}

// The same without an earlier request/header: the same plan/mode, no notice owed.
func TestCleanIdleSelectionFreshSession(t *testing.T) {
	b := &logb{}
	b.pm(true)
	b.turnStart(1)
	b.stepStart(1, 1)
	b.user("explore")
	b.header("initial")
	b.stepEnd(1, 1)
	b.turnEnd(1)
	expect(t, Input{Events: b.evs})
}

// A mid-turn selection applied at step N+1 with its notice last; the ack matches.
func TestCleanMidTurnSelection(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.stepStart(1, 1)
	b.user("go")
	b.header("initial")
	b.toolResult("file")
	b.stepEnd(1, 1)
	pmSeq := b.pm(true)
	b.stepStart(1, 2)
	b.user("draft it")
	b.notice(harness.NoticePlanOn)
	b.header("change")
	b.stepEnd(1, 2)
	b.turnEnd(1)
	acks := []Ack{{Turn: 1, Step: 2, Seq: pmSeq, Result: "Admitted", Active: true, NextSeq: pmSeq + 1, Notice: harness.NoticePlanOn}}
	expect(t, Input{Events: b.evs, Acks: acks, Final: &Final{Selection: bp(true), TakenOn: bp(true)}})
}

// An approved exit is appended at the next boundary and never narrated; the spec
// still holds the old selection (true), which is not a lost selection.
func TestCleanApprovedExit(t *testing.T) {
	b := &logb{}
	b.pm(true)
	b.turnStart(1)
	b.stepStart(1, 1)
	b.user("plan it")
	b.header("initial")
	b.raw("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"exit_plan_mode","arguments":"{}"}`)
	b.toolResult(harness.ExitApprovedText)
	b.stepEnd(1, 1)
	seq := b.pm(false)
	b.stepStart(1, 2)
	b.header("change")
	b.stepEnd(1, 2)
	b.turnEnd(1)
	acks := []Ack{{Turn: 1, Step: 2, Seq: seq, Result: "Admitted", Active: false, NextSeq: seq + 1}}
	expect(t, Input{Events: b.evs, Acks: acks, Final: &Final{Selection: bp(true), TakenOn: bp(true)}})

	// The same with the tool/result shape earlier operator releases wrote.
	b = &logb{}
	b.pm(true)
	b.turnStart(1)
	b.stepStart(1, 1)
	b.header("initial")
	b.raw("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"exit_plan_mode","arguments":"{}"}`)
	b.legacyToolResult("exit_plan_mode", harness.ExitApprovedText)
	b.stepEnd(1, 1)
	b.pm(false)
	b.stepStart(1, 2)
	b.header("change")
	b.stepEnd(1, 2)
	b.turnEnd(1)
	expect(t, Input{Events: b.evs})

	// Not an approval: the same text answering another tool's call.
	b = &logb{}
	b.pm(true)
	b.turnStart(1)
	b.stepStart(1, 1)
	b.header("initial")
	b.raw("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{}"}`)
	b.toolResult(harness.ExitApprovedText)
	b.stepEnd(1, 1)
	b.pm(false)
	b.stepStart(1, 2)
	b.header("change")
	b.stepEnd(1, 2)
	b.turnEnd(1)
	expect(t, Input{Events: b.evs}, "NoticeMissing@7")
}

// The real harness's log of test/harness's scenario A: a plan approved through
// exit_plan_mode (no notice owed: the approved exit is not narrated), then idle /plan and
// /plan off before turn 2. rc.8 records the queued "switched to plan mode" notice in turn 2
// although the later /plan off reversed it; the plan document withdraws such a notice, so
// the checker reports that one NoticeNotOwed and nothing else.
func TestRealHarnessLog(t *testing.T) {
	raw, err := os.ReadFile("../sessionlog/testdata/harness/A_idle_review_approve.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var evs []harness.Event
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		if i == 0 {
			continue // the session header
		}
		var ev harness.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	vs := Check(Input{Events: evs})
	if len(vs) != 1 || vs[0].Kind != NoticeNotOwed {
		t.Fatalf("violations on the real log: %s", dump(vs))
	}
}

// A selection during a retried step waits; it commits at turn 2 step 1 with its notice.
func TestCleanSelectionDuringRetry(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.stepStart(1, 1)
	b.user("go")
	b.header("initial")
	b.raw("llm/retry", `{"attempt":1}`)
	b.stepEnd(1, 1)
	b.turnEnd(1)
	b.turnStart(2)
	b.pm(true)
	b.stepStart(2, 1)
	b.user("continue")
	b.notice(harness.NoticePlanOn)
	b.header("change")
	b.stepEnd(2, 1)
	b.turnEnd(2)
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(true), TakenOn: bp(true)}})
}

// A failed append fails the proposal (turn/end blocked, nothing of the step
// logged); the selection stays pending, and the next healthy boundary appends it.
func TestCleanAppendFailure(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.stepStart(1, 1)
	b.header("initial")
	b.stepEnd(1, 1)
	failedAt := int64(len(b.evs))
	b.raw("turn/end", `{"turn":1,"reason":{"kind":"blocked","message":"log store down"}}`)
	b.turnStart(2)
	seq := b.pm(true)
	b.stepStart(2, 1)
	b.user("again")
	b.notice(harness.NoticePlanOn)
	b.header("change")
	b.stepEnd(2, 1)
	acks := []Ack{
		{Turn: 1, Step: 2, Seq: failedAt, Result: "Failed", Active: false, NextSeq: failedAt},
		{Turn: 2, Step: 1, Seq: seq, Result: "Admitted", Active: true, NextSeq: seq + 1, Notice: harness.NoticePlanOn},
	}
	// The turn is still open: the final check waits.
	expect(t, Input{Events: b.evs, Acks: acks, Final: &Final{Selection: bp(true), TakenOn: bp(true)}})
}

// Between turns the user may toggle several times: each commit is a separate selection; the
// notice owed is the last one's (on then off with told=false: nothing to say).
func TestCleanTogglesBetweenTurns(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.turnEnd(1)
	b.pm(true)
	b.pm(false)
	b.pm(true)
	b.turnStart(2)
	b.stepStart(2, 1)
	b.user("x")
	b.notice(harness.NoticePlanOn)
	b.header("change")
	b.stepEnd(2, 1)
	b.turnEnd(2)
	b.pm(false)
	b.pm(true)
	b.turnStart(3)
	b.plainStep(3, 1) // told=true already: no notice owed
	b.turnEnd(3)
	expect(t, Input{Events: b.evs})
}

// A late plan/mode (the agent gave up waiting) precedes turn/end; its notice is owed to the
// next turn's first step.
func TestCleanLateAnswer(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.pm(true)
	b.raw("turn/end", `{"turn":1,"reason":{"kind":"blocked","message":"timeout"}}`)
	b.turnStart(2)
	b.stepStart(2, 1)
	b.notice(harness.NoticePlanOn)
	b.header("change")
	b.stepEnd(2, 1)
	b.turnEnd(2)
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(true), TakenOn: bp(true)}})
}

func TestDuplicate(t *testing.T) {
	b := &logb{}
	b.pm(true)
	b.pm(true)
	expect(t, Input{Events: b.evs}, "DuplicatePlanMode@1")
	b = &logb{}
	b.pm(false) // an empty log folds to inactive already
	expect(t, Input{Events: b.evs}, "DuplicatePlanMode@0")
}

func TestInsideStep(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.stepStart(1, 1)
	b.header("initial")
	b.pm(true)
	b.stepEnd(1, 1)
	b.turnEnd(1)
	got := Check(Input{Events: b.evs})
	if kinds(got) != "PlanModeInsideStep@3" || got[0].Related[0] != 1 {
		t.Fatalf("got %s", dump(got))
	}
}

func TestTwoAtOneBoundary(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.pm(true)
	b.pm(false)
	b.plainStep(1, 2)
	b.turnEnd(1)
	got := Check(Input{Events: b.evs})
	if kinds(got) != "TwoPlanModesAtOneBoundary@5" || got[0].Related[0] != 4 {
		t.Fatalf("got %s", dump(got))
	}
	// turn/start then two before step 1 is the same boundary.
	b = &logb{}
	b.turnStart(1)
	b.pm(true)
	b.pm(false)
	expect(t, Input{Events: b.evs}, "TwoPlanModesAtOneBoundary@2")
}

func TestSeqGap(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.turnEnd(1)
	evs := append([]harness.Event{}, b.evs[:2]...)
	evs = append(evs, b.evs[3:]...) // drop seq 2
	expect(t, Input{Events: evs}, "SeqGap@3")
	evs = append([]harness.Event{}, b.evs...)
	evs = append(evs, b.evs[4]) // seq 4 again
	expect(t, Input{Events: evs}, "SeqGap@4")
	expect(t, Input{Events: b.evs[1:]}, "SeqGap@1") // does not start at 0
}

func TestInvalidPlanMode(t *testing.T) {
	b := &logb{}
	b.raw("plan/mode", `{"active":42}`)
	b.raw("plan/mode", `{"active":true,"x":1}`)
	expect(t, Input{Events: b.evs}, "InvalidPlanMode@0", "InvalidPlanMode@1")
}

func ackLog() (*logb, int64) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	seq := b.pm(true)
	b.stepStart(1, 2)
	b.notice(harness.NoticePlanOn)
	b.header("change")
	b.stepEnd(1, 2)
	return b, seq
}

func TestAckNotInLog(t *testing.T) {
	b, seq := ackLog()
	ok := Ack{Turn: 1, Step: 2, Seq: seq, Result: "Admitted", Active: true, NextSeq: seq + 1}
	expect(t, Input{Events: b.evs, Acks: []Ack{ok}})
	cases := map[string]Ack{
		"wrong state":           {Turn: 1, Step: 2, Seq: seq, Result: "Admitted", Active: false, NextSeq: seq + 1},
		"no plan/mode appended": {Turn: 1, Step: 2, Seq: seq - 1, Result: "Admitted", Active: false, NextSeq: seq},
		"beyond the log":        {Turn: 1, Step: 3, Seq: 40, Result: "Admitted", Active: true, NextSeq: 41},
		"nextSeq off by two":    {Turn: 1, Step: 2, Seq: seq - 1, Result: "Admitted", Active: true, NextSeq: seq + 1},
		"failed, wrong state":   {Turn: 1, Step: 2, Seq: seq + 1, Result: "Failed", Active: false, NextSeq: seq + 1},
		"notice of the other":   {Turn: 1, Step: 2, Seq: seq, Result: "Admitted", Active: true, NextSeq: seq + 1, Notice: harness.NoticeDefault},
	}
	for name, a := range cases {
		got := Check(Input{Events: b.evs, Acks: []Ack{a}})
		if len(got) == 0 || got[0].Kind != AckNotInLog || got[0].Seq != a.Seq {
			t.Errorf("%s: got [%s], want AckStateNotInLog@%d", name, kinds(got), a.Seq)
		}
	}
}

func TestFinalSelectionNeverCommitted(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.turnEnd(1)
	// The user selected true, the manager took it on, nothing pending, no turn open: the log
	// must hold it.
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(true), TakenOn: bp(true)}}, "SelectionNeverCommitted@-1")
	// Never taken on.
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(true)}}, "SelectionNeverCommitted@-1")
	// Pending: still waiting, not a violation (yet).
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(true), TakenOn: bp(true), Pending: true}})
	// No selection: nothing to check.
	expect(t, Input{Events: b.evs, Final: &Final{}})
	// A turn open: the selection may wait for a boundary.
	b.turnStart(2)
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(true), TakenOn: bp(true)}})
	// Selected off while the log says on.
	b = &logb{}
	b.pm(true)
	expect(t, Input{Events: b.evs, Final: &Final{Selection: bp(false), TakenOn: bp(false)}}, "SelectionNeverCommitted@0")
}

// The narration rule, violated three ways.
func TestNoticeMissing(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1) // told = false
	seq := b.pm(true)
	start := b.stepStart(1, 2)
	b.user("x")
	b.header("change")
	b.stepEnd(1, 2)
	got := Check(Input{Events: b.evs})
	if kinds(got) != fmt.Sprintf("NoticeMissing@%d", seq) || got[0].Related[0] != start {
		t.Fatalf("got %s", dump(got))
	}
}

func TestNoticeTextMismatch(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.pm(true)
	b.stepStart(1, 2)
	n := b.notice(harness.NoticeDefault) // says "back to default" for an entry
	b.header("change")
	b.stepEnd(1, 2)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeTextMismatch@%d", n))
	// Content and summary disagree.
	b = &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.pm(true)
	b.stepStart(1, 2)
	n = b.raw("user/message", `{"content":[{"type":"text","text":"The user switched this session to plan mode."}],`+
		`"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"something else"},"role":"user","id":"n"}`)
	b.stepEnd(1, 2)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeTextMismatch@%d", n), "NoticeMissing@4")
}

func TestNoticeNotOwed(t *testing.T) {
	// No plan/mode at all.
	b := &logb{}
	b.turnStart(1)
	b.stepStart(1, 1)
	n := b.notice(harness.NoticePlanOn)
	b.header("initial")
	b.stepEnd(1, 1)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeNotOwed@%d", n))

	// The last header already described plan mode on (told == target).
	b = &logb{}
	b.pm(true)
	b.turnStart(1)
	b.plainStep(1, 1) // told = true
	b.turnEnd(1)
	b.pm(false)
	b.pm(true) // between turns: told still true, so this one owes nothing, and supersedes
	b.turnStart(2)
	b.stepStart(2, 1)
	n = b.notice(harness.NoticePlanOn)
	b.stepEnd(2, 1)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeNotOwed@%d", n))

	// An approved exit is never narrated.
	b = &logb{}
	b.pm(true)
	b.turnStart(1)
	b.stepStart(1, 1)
	b.header("initial")
	b.legacyToolResult("exit_plan_mode", harness.ExitApprovedText)
	b.stepEnd(1, 1)
	b.pm(false)
	b.stepStart(1, 2)
	n = b.notice(harness.NoticeDefault)
	b.stepEnd(1, 2)
	got := Check(Input{Events: b.evs})
	if kinds(got) != fmt.Sprintf("NoticeNotOwed@%d", n) || !strings.Contains(got[0].Message, "approved exit") {
		t.Fatalf("got %s", dump(got))
	}
	// ...unless the caller knows the user selected it (Sources override the inference).
	expect(t, Input{Events: b.evs, Sources: map[int64]Source{6: SourceUser}})

	// A dismissed review (isError false, not approved) is no exit: the user's later off owes
	// the notice.
	b = &logb{}
	b.pm(true)
	b.turnStart(1)
	b.stepStart(1, 1)
	b.header("initial")
	b.legacyToolResult("exit_plan_mode", harness.ExitErrDismissed)
	b.stepEnd(1, 1)
	seq := b.pm(false)
	b.plainStep(1, 2)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeMissing@%d", seq))

	// Twice in one step.
	b = &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.pm(true)
	b.stepStart(1, 2)
	b.notice(harness.NoticePlanOn)
	n = b.notice(harness.NoticePlanOn)
	b.stepEnd(1, 2)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeNotOwed@%d", n))

	// Outside any step.
	b = &logb{}
	b.turnStart(1)
	n = b.notice(harness.NoticePlanOn)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeNotOwed@%d", n))
}

// A notice is owed once: the second step after the plan/mode owes nothing.
func TestNoticeOnlyInFirstAdmittedStep(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.plainStep(1, 1)
	b.pm(true)
	b.stepStart(1, 2)
	b.notice(harness.NoticePlanOn)
	b.header("change")
	b.stepEnd(1, 2)
	b.stepStart(1, 3)
	n := b.notice(harness.NoticePlanOn)
	b.stepEnd(1, 3)
	expect(t, Input{Events: b.evs}, fmt.Sprintf("NoticeNotOwed@%d", n))
}

// Several violations in one log are all reported, in log order.
func TestReportsEverything(t *testing.T) {
	b := &logb{}
	b.turnStart(1)
	b.stepStart(1, 1)
	b.header("initial")
	b.pm(true) // inside the step
	b.stepEnd(1, 1)
	b.pm(true) // duplicate
	b.stepStart(1, 2)
	b.stepEnd(1, 2)
	b.turnEnd(1)
	got := Check(Input{Events: b.evs, Final: &Final{Selection: bp(false), TakenOn: bp(false)}})
	if kinds(got) != "PlanModeInsideStep@3,DuplicatePlanMode@5,NoticeMissing@3,SelectionNeverCommitted@3" {
		t.Fatalf("got %s", dump(got))
	}
}
