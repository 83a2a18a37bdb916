// Package sessionlogtest is the conformance suite of sessionlog.Store: any backend runs it
// with Run to show it keeps the store's promises.
package sessionlogtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// Backend is a Store implementation under test.
type Backend struct {
	// Open returns a store; the suite closes it. Stores opened by one Backend share a
	// database, so the suite's tests use session ids derived from their own names.
	Open func(t *testing.T) sessionlog.Store
	// Corrupt overwrites a stored event's data without validation and Delete removes a stored
	// event, for the check that reads report such rows as corrupt, never skip them. A backend
	// that leaves them nil skips that check.
	Corrupt func(ctx context.Context, s sessionlog.Store, sessionID string, seq int64, data string) error
	Delete  func(ctx context.Context, s sessionlog.Store, sessionID string, seq int64) error
}

func sid(t *testing.T) string { return strings.ReplaceAll(t.Name(), "/", ".") }

func ev(typ, data string) harness.Event { return harness.Event{Type: typ, Data: json.RawMessage(data)} }

func mustAppend(t *testing.T, s sessionlog.Store, id string, events ...harness.Event) harness.Tail {
	t.Helper()
	next, err := s.Tail(context.Background(), id)
	if err != nil {
		t.Fatalf("tail: %v", err)
	}
	tail, err := s.Append(context.Background(), id, harness.Sequence(next.NextSeq, events...))
	if err != nil {
		t.Fatalf("append %d events at %d: %v", len(events), next.NextSeq, err)
	}
	return tail
}

func readAll(t *testing.T, s sessionlog.Store, id string) []harness.Event {
	t.Helper()
	evs, err := s.ReadFrom(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return evs
}

// jsonEqual compares two JSON texts by meaning (decoded values).
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func boolp(b bool) *bool { return &b }

// Run runs the conformance suite against backend b: every behaviour the Store interface
// promises (compare-and-swap appends, validation, the maintained tail, reads, fork, seed), on
// stores from b.Open.
func Run(t *testing.T, b Backend) {
	t.Run("EmptySession", b.emptySession)
	t.Run("ReadAfterAppend", b.readAfterAppend)
	t.Run("Conflict", b.conflict)
	t.Run("ConcurrentAppendersRaceForSameSeq", b.concurrentAppendersRaceForSameSeq)
	t.Run("TailAfterEveryKindOfEvent", b.tailAfterEveryKindOfEvent)
	t.Run("LargeAndUnicodePayloads", b.largeAndUnicodePayloads)
	t.Run("UnknownTypesRoundTrip", b.unknownTypesRoundTrip)
	t.Run("InvalidPayloadsRefused", b.invalidPayloadsRefused)
	t.Run("CorruptedRowReported", b.corruptedRowReported)
	t.Run("Fork", b.fork)
	t.Run("SeedKeepsHeader", b.seedKeepsHeader)
	t.Run("ClaimOwner", b.claimOwner)
	t.Run("ForkOwnership", b.forkOwnership)
	t.Run("SeedOwnership", b.seedOwnership)
	t.Run("ReleaseOwner", b.releaseOwner)
	t.Run("Sessions", b.sessions)
	t.Run("ClaimOwners", b.claimOwners)
}

// store opens a store from the backend and closes it when t ends.
func (b Backend) store(t *testing.T) sessionlog.Store {
	s := b.Open(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func (b Backend) emptySession(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	tail, err := s.Tail(ctx, sid(t))
	if err != nil || !reflect.DeepEqual(tail, harness.EmptyTail()) {
		t.Fatalf("tail of unknown session = %+v, %v; want %+v", tail, err, harness.EmptyTail())
	}
	evs, err := s.ReadFrom(ctx, sid(t), 0, 0)
	if err != nil || len(evs) != 0 {
		t.Fatalf("read of unknown session = %v, %v", evs, err)
	}
	if _, err := s.Info(ctx, sid(t)); !errors.Is(err, sessionlog.ErrNotFound) {
		t.Fatalf("info of unknown session: err = %v, want sessionlog.ErrNotFound", err)
	}
}

func (b Backend) readAfterAppend(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := sid(t)
	in := []harness.Event{
		harness.MustEvent(harness.TypeCommandRun, harness.CommandRun{CommandID: "c1", Name: "plan", Args: new(""), Source: harness.UserSource}),
		harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}),
		{Type: "x/custom", Time: 1785406805120, Data: json.RawMessage(`{ "b": 1, "a": [1, 2.50, "z"] }`), Ignorable: true},
	}
	before := time.Now().UnixMilli()
	tail, err := s.Append(ctx, id, harness.Sequence(0, in...))
	if err != nil {
		t.Fatal(err)
	}
	if tail.NextSeq != 3 || !tail.Active || tail.LastPlanModeSeq != 1 {
		t.Fatalf("tail = %+v", tail)
	}
	checkReadBack(t, in, readAll(t, s, id), before)
	checkReadWindows(ctx, t, s, id)
	info, err := s.Info(ctx, id)
	if err != nil || info.ID != id || info.CreatedAt < before || info.ParentSession != "" || info.SeedLength != 0 {
		t.Fatalf("info = %+v, %v", info, err)
	}
}

// checkReadBack checks that the events readAfterAppend wrote (in) read back as written (out),
// with a zero time filled in at or after before.
func checkReadBack(t *testing.T, in, out []harness.Event, before int64) {
	t.Helper()
	if len(out) != 3 {
		t.Fatalf("read %d events, want 3", len(out))
	}
	for i, e := range out {
		if e.Seq != int64(i) || e.Type != in[i].Type || !jsonEqual(e.Data, in[i].Data) || e.Ignorable != in[i].Ignorable {
			t.Errorf("event %d = %+v, want %+v", i, e, in[i])
		}
	}
	if out[0].Time < before || out[0].Time > time.Now().UnixMilli() {
		t.Errorf("zero time not filled with now: %d", out[0].Time)
	}
	if out[2].Time != 1785406805120 {
		t.Errorf("explicit time not kept: %d", out[2].Time)
	}
	// Key order and number text are kept (data is compacted, not re-encoded).
	if string(out[2].Data) != `{"b":1,"a":[1,2.50,"z"]}` {
		t.Errorf("data = %s", out[2].Data)
	}
}

// checkReadWindows checks ReadFrom's start and limit on a three-event session.
func checkReadWindows(ctx context.Context, t *testing.T, s sessionlog.Store, id string) {
	t.Helper()
	part, err := s.ReadFrom(ctx, id, 1, 1)
	if err != nil || len(part) != 1 || part[0].Seq != 1 {
		t.Fatalf("ReadFrom(1, limit 1) = %+v, %v", part, err)
	}
	part, err = s.ReadFrom(ctx, id, 2, 0)
	if err != nil || len(part) != 1 || part[0].Seq != 2 {
		t.Fatalf("ReadFrom(2) = %+v, %v", part, err)
	}
	part, err = s.ReadFrom(ctx, id, 3, 0)
	if err != nil || len(part) != 0 {
		t.Fatalf("ReadFrom(3) = %+v, %v", part, err)
	}
}

func (b Backend) conflict(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := sid(t)
	mustAppend(t, s, id, ev("a", `{}`), ev("b", `{}`))
	for _, first := range []int64{0, 1, 3, 100} {
		_, err := s.Append(ctx, id, harness.Sequence(first, ev("stale", `{}`)))
		var c *sessionlog.ConflictError
		if !errors.As(err, &c) || c.Expected != 2 || c.Got != first || c.SessionID != id || !sessionlog.IsConflict(err) {
			t.Fatalf("append at %d: err = %v, want conflict expected 2", first, err)
		}
	}
	// A batch starting at 0 on a new session is fine; one starting later is refused.
	if _, err := s.Append(ctx, id+"-new", harness.Sequence(1, ev("a", `{}`))); !sessionlog.IsConflict(err) {
		t.Fatalf("append at 1 to an empty session: err = %v, want conflict", err)
	}
	if evs := readAll(t, s, id); len(evs) != 2 {
		t.Fatalf("refused appends wrote something: %d events", len(evs))
	}
	if tail, _ := s.Tail(ctx, id+"-new"); tail.NextSeq != 0 {
		t.Fatalf("refused first append created the session: %+v", tail)
	}
	if _, err := s.Info(ctx, id+"-new"); !errors.Is(err, sessionlog.ErrNotFound) {
		t.Fatalf("refused first append created a header: %v", err)
	}
	// A batch with a gap inside is refused as invalid.
	batch := []harness.Event{{Type: "a", Seq: 2, Data: json.RawMessage(`{}`)}, {Type: "a", Seq: 4, Data: json.RawMessage(`{}`)}}
	if _, err := s.Append(ctx, id, batch); !sessionlog.IsInvalid(err) {
		t.Fatalf("gapped batch: err = %v, want invalid", err)
	}
}

func (b Backend) concurrentAppendersRaceForSameSeq(t *testing.T) {
	ctx := context.Background()
	const writers, rounds = 8, 12
	id := sid(t)
	stores := make([]sessionlog.Store, writers)
	for i := range stores {
		stores[i] = b.store(t) // separate pools: separate connections race for the seq
	}
	for r := range rounds {
		raceForSeq(ctx, t, stores, id, r)
	}
	evs := readAll(t, stores[0], id)
	if len(evs) != rounds {
		t.Fatalf("log has %d events, want %d", len(evs), rounds)
	}
	for i, e := range evs {
		var d struct{ Round int }
		if e.Seq != int64(i) || json.Unmarshal(e.Data, &d) != nil || d.Round != i {
			t.Fatalf("event %d = %+v: gap, duplicate or wrong round", i, e)
		}
	}
	// Writers that retry on conflict all get in, with no gaps or duplicates.
	var wg sync.WaitGroup
	const each = 10
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < each; {
				tail, err := stores[w].Tail(ctx, id)
				if err != nil {
					t.Error(err)
					return
				}
				_, err = stores[w].Append(ctx, id, harness.Sequence(tail.NextSeq, ev("retry", fmt.Sprintf(`{"writer":%d,"n":%d}`, w, n))))
				if err == nil {
					n++
				} else if !sessionlog.IsConflict(err) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs = readAll(t, stores[0], id)
	if len(evs) != rounds+writers*each {
		t.Fatalf("log has %d events, want %d", len(evs), rounds+writers*each)
	}
	seen := map[string]bool{}
	for i, e := range evs[rounds:] {
		if e.Seq != int64(rounds+i) || seen[string(e.Data)] {
			t.Fatalf("event %+v: gap or duplicate", e)
		}
		seen[string(e.Data)] = true
	}
}

// raceForSeq lets every store append seq r at once and checks that exactly one wins and the
// others get a conflict.
func raceForSeq(ctx context.Context, t *testing.T, stores []sessionlog.Store, id string, r int) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]error, len(stores))
	for w := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, results[w] = stores[w].Append(ctx, id, harness.Sequence(int64(r), ev("race", fmt.Sprintf(`{"writer":%d,"round":%d}`, w, r))))
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for w, err := range results {
		switch {
		case err == nil:
			wins++
		case sessionlog.IsConflict(err):
		default:
			t.Fatalf("round %d writer %d: unexpected error %v", r, w, err)
		}
	}
	if wins != 1 {
		t.Fatalf("round %d: %d appends won seq %d, want exactly 1", r, wins, r)
	}
}

func (b Backend) tailAfterEveryKindOfEvent(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := sid(t)
	header := harness.MustEvent(harness.TypeRequestHeader, harness.RequestHeader{
		Header: harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "deepseek", Model: "m"}},
		Reason: harness.HeaderReasonInitial,
	})
	steps := []struct {
		ev   harness.Event
		want func(*harness.Tail)
	}{
		{harness.MustEvent(harness.TypeCommandRun, harness.CommandRun{CommandID: "c1", Name: "plan", Source: harness.UserSource}), func(*harness.Tail) {}},
		{harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}), func(t *harness.Tail) { t.Active = true; t.LastPlanModeSeq = 1 }},
		{harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 1}), func(t *harness.Tail) { t.Turn = 1; t.TurnOpen = true }},
		{harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: 1, Step: 1}), func(t *harness.Tail) { t.Step = 1; t.StepOpen = true; t.LastStepStartSeq = 3 }},
		{harness.MustEvent(harness.TypeUserMessage, harness.NewUserText("m1", "explore")), func(*harness.Tail) {}},
		{header, func(t *harness.Tail) { t.LastShown = boolp(true) }},
		{ev(harness.TypeAssistantMessage, `{"role":"assistant","content":[]}`), func(*harness.Tail) {}},
		{harness.MustEvent(harness.TypeStepEnd, harness.StepEnd{Turn: 1, Step: 1}), func(t *harness.Tail) { t.StepOpen = false }},
		{harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: false}), func(t *harness.Tail) { t.Active = false; t.LastPlanModeSeq = 8 }},
		{harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: 1, Step: 2}), func(t *harness.Tail) { t.Step = 2; t.StepOpen = true; t.LastStepStartSeq = 9 }},
		{header, func(t *harness.Tail) { t.LastShown = boolp(false) }},
		{harness.MustEvent(harness.TypeStepEnd, harness.StepEnd{Turn: 1, Step: 2}), func(t *harness.Tail) { t.StepOpen = false }},
		{harness.MustEvent(harness.TypeTurnEnd, harness.TurnEnd{Turn: 1, Reason: harness.TurnCompleted}), func(t *harness.Tail) { t.TurnOpen = false; t.Step = 0 }},
		{harness.MustEvent(harness.TypeCommandDone, harness.CommandDone{CommandID: "c1", Kind: harness.CommandSuccess, Text: new("Plan mode on.")}), func(*harness.Tail) {}},
		{harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}), func(t *harness.Tail) { t.Active = true; t.LastPlanModeSeq = 14 }},
		{harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 2}), func(t *harness.Tail) { t.Turn = 2; t.TurnOpen = true }},
		{harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: 2, Step: 1}), func(t *harness.Tail) { t.Step = 1; t.StepOpen = true; t.LastStepStartSeq = 16 }},
	}
	want := harness.EmptyTail()
	for i, st := range steps {
		st.want(&want)
		want.NextSeq = int64(i + 1)
		got, err := s.Append(ctx, id, harness.Sequence(int64(i), st.ev))
		if err != nil {
			t.Fatalf("append %d (%s): %v", i, st.ev.Type, err)
		}
		stored, err := s.Tail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		folded, err := harness.FoldTail(readAll(t, s, id))
		if err != nil {
			t.Fatal(err)
		}
		for name, tl := range map[string]harness.Tail{"returned": got, "stored": stored, "folded": folded} {
			if !reflect.DeepEqual(tl, want) {
				t.Fatalf("after %d (%s): %s tail = %s, want %s", i, st.ev.Type, name, fmtTail(tl), fmtTail(want))
			}
		}
	}
}

func (b Backend) largeAndUnicodePayloads(t *testing.T) {
	s := b.store(t)
	id := sid(t) + "-ünï-☃"
	big := strings.Repeat("x", 1<<20)
	text := "plan ☃ → 計画 🚀 \u00e9\u0301 \\ \"quoted\" \u2028 tab\t nul\u0000"
	evs := []harness.Event{
		harness.MustEvent(harness.TypeUserMessage, harness.NewUserText("m1", big)),
		harness.MustEvent(harness.TypeUserMessage, harness.NewUserText("m2", text)),
		ev("x/raw-unicode", `{"t":"日本語","e":"\u65e5"}`),
	}
	mustAppend(t, s, id, evs...)
	out := readAll(t, s, id)
	if len(out) != 3 {
		t.Fatalf("read %d events", len(out))
	}
	var m harness.UserMessage
	if err := out[0].Decode(&m); err != nil || len(out[0].Data) < 1<<20 || !jsonEqual(out[0].Data, evs[0].Data) {
		t.Fatalf("1 MiB payload did not round-trip (len %d, %v)", len(out[0].Data), err)
	}
	if !jsonEqual(out[1].Data, evs[1].Data) || !bytes.Equal(out[1].Data, evs[1].Data) {
		t.Fatalf("unicode payload: got %s want %s", out[1].Data, evs[1].Data)
	}
	if string(out[2].Data) != `{"t":"日本語","e":"\u65e5"}` {
		t.Fatalf("escapes not kept verbatim: %s", out[2].Data)
	}
}

func (b Backend) unknownTypesRoundTrip(t *testing.T) {
	s := b.store(t)
	id := sid(t)
	in := []harness.Event{
		{Type: harness.TypeToolResult, Data: json.RawMessage(`{"turn":1,"step":1,"message":{"role":"tool","content":[{"type":"text","text":"Error: boom"}],"isError":true}}`),
			SourceEventSeqs: []int64{0, 3}, SurfaceOp: json.RawMessage(`{"op":"replace","start":0,"end":2}`)},
		{Type: "vendor/thing.v2", Data: json.RawMessage(`[1,{"z":null,"a":-1.5e3},"s",true]`), Ignorable: true},
		{Type: harness.TypeSessionEndSeed, Data: json.RawMessage(`{}`)},
		{Type: "x/scalar", Data: json.RawMessage(`"just a string"`)},
	}
	mustAppend(t, s, id, in...)
	out := readAll(t, s, id)
	for i := range in {
		a, _ := json.Marshal(harness.Sequence(int64(i), in[i])[0])
		bb, _ := json.Marshal(out[i])
		var x, y map[string]any
		_ = json.Unmarshal(a, &x)
		_ = json.Unmarshal(bb, &y)
		delete(x, "time")
		delete(y, "time")
		if !reflect.DeepEqual(x, y) {
			t.Errorf("event %d: stored %s, read %s", i, a, bb)
		}
	}
}

// invalidPayloadsRefused checks that every invalid event is refused, alone or inside a batch,
// with the field it names and the harness's wording.
//
//nolint:goconst // each case spells out its expected field path so it reads on its own, like the _test.go tables the config exempts
func (b Backend) invalidPayloadsRefused(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := sid(t)
	mustAppend(t, s, id, ev("ok", `{}`))
	cases := []struct {
		name  string
		ev    harness.Event
		field string
		msg   string
	}{
		{"plan/mode number", ev(harness.TypePlanMode, `{"active":42}`), "data.active", "plan/mode carries invalid active state 42; expected a boolean"},
		{"plan/mode missing", ev(harness.TypePlanMode, `{}`), "data.active", "plan/mode carries invalid active state undefined; expected a boolean"},
		{"plan/mode string", ev(harness.TypePlanMode, `{"active":"yes"}`), "data.active", `plan/mode carries invalid active state "yes"; expected a boolean`},
		{"plan/mode null", ev(harness.TypePlanMode, `{"active":null}`), "data.active", "plan/mode carries invalid active state null; expected a boolean"},
		{"plan/mode object", ev(harness.TypePlanMode, `{"active": {"a": 1}}`), "data.active", `plan/mode carries invalid active state {"a":1}; expected a boolean`},
		{"plan/mode not object", ev(harness.TypePlanMode, `true`), "data.active", "plan/mode carries invalid active state undefined; expected a boolean"},
		{"plan/mode extra field", ev(harness.TypePlanMode, `{"active":true,"why":"x"}`), "data.why", `unexpected field "why"`},
		{"empty type", ev("", `{}`), "type", "type is empty"},
		{"bad json", ev("x/y", `{"a":`), "data", "not valid JSON"},
		{"missing data", ev("x/y", ``), "data", "data is missing"},
		{"turn/start no turn", ev(harness.TypeTurnStart, `{}`), "data.turn", "turn is missing"},
		{"turn/start string turn", ev(harness.TypeTurnStart, `{"turn":"1"}`), "data.turn", `turn is "1"; expected a non-negative integer`},
		{"turn/start fraction", ev(harness.TypeTurnStart, `{"turn":1.5}`), "data.turn", "turn is 1.5"},
		{"turn/end no reason", ev(harness.TypeTurnEnd, `{"turn":1}`), "data.reason", "reason is missing"},
		{"turn/end reason kind", ev(harness.TypeTurnEnd, `{"turn":1,"reason":{}}`), "data.reason.kind", "reason.kind is undefined"},
		{"step/start negative", ev(harness.TypeStepStart, `{"turn":1,"step":-1}`), "data.step", "step is -1"},
		{"step/end array", ev(harness.TypeStepEnd, `[1,2]`), "data", "expected an object"},
		{"request/header no header", ev(harness.TypeRequestHeader, `{"reason":"change"}`), "data.header", "header is undefined"},
		{"request/header reason", ev(harness.TypeRequestHeader, `{"header":{},"reason":7}`), "data.reason", "reason is 7"},
		{"user/message role", ev(harness.TypeUserMessage, `{"content":[],"source":{"kind":"user"},"role":"assistant","id":"m"}`), "data.role", `role is "assistant"`},
		{"user/message source", ev(harness.TypeUserMessage, `{"content":[],"source":"user","role":"user","id":"m"}`), "data.source", `source is "user"`},
		{"user/message id", ev(harness.TypeUserMessage, `{"content":[],"source":{"kind":"user"},"role":"user"}`), "data.id", "id is missing"},
		{"command/run id", ev(harness.TypeCommandRun, `{"name":"plan","source":{"kind":"user"}}`), "data.commandId", "commandId is missing"},
		{"command/run args", ev(harness.TypeCommandRun, `{"commandId":"c","name":"plan","args":1,"source":{"kind":"user"}}`), "data.args", "args is 1"},
		{"command/done kind", ev(harness.TypeCommandDone, `{"commandId":"c","kind":"maybe"}`), "data.kind", `kind is "maybe"`},
		{"surfaceOp", harness.Event{Type: harness.TypeUserMessage, Data: json.RawMessage(`{"content":[],"source":{"kind":"user"},"role":"user","id":"m"}`),
			SurfaceOp: json.RawMessage(`"prepend"`)}, "surfaceOp", `surfaceOp is "prepend"`},
		{"reserved type", ev("session", `{}`), "type", "reserved"},
		{"negative zero", ev("x/y", `{"a":"-0","b":[1,-0.0e3]}`), "data", "negative zero (-0) at byte 17"},
		{"invalid utf-8", ev("x/y", "{\"a\":\"\xff\"}"), "data", "not valid UTF-8"},
	}
	for _, c := range cases {
		// Alone, and second in a batch behind a valid event: nothing of the batch is stored.
		for _, batch := range [][]harness.Event{{c.ev}, {ev("fine", `{}`), c.ev}} {
			_, err := s.Append(ctx, id, harness.Sequence(1, batch...))
			var v *sessionlog.ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("%s: err = %v, want a sessionlog.ValidationError", c.name, err)
			}
			wantSeq := int64(len(batch))
			if v.Field != c.field || v.SessionID != id || v.Seq != wantSeq || !strings.Contains(err.Error(), c.msg) ||
				!strings.Contains(err.Error(), fmt.Sprintf("session %q seq %d", id, wantSeq)) {
				t.Fatalf("%s: err = %q (field %q), want field %q seq %d and %q", c.name, err, v.Field, c.field, wantSeq, c.msg)
			}
		}
	}
	if evs := readAll(t, s, id); len(evs) != 1 {
		t.Fatalf("refused appends stored %d events", len(evs)-1)
	}
	if tail, _ := s.Tail(ctx, id); tail.NextSeq != 1 {
		t.Fatalf("refused appends moved the tail: %+v", tail)
	}
}

func (b Backend) corruptedRowReported(t *testing.T) {
	ctx := context.Background()
	if b.Corrupt == nil || b.Delete == nil {
		t.Skip("the backend cannot tamper with its stored rows (Backend.Corrupt, Backend.Delete)")
	}
	s := b.store(t)
	id := sid(t)
	mustAppend(t, s, id, ev("a", `{}`), harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}), ev("c", `{}`), ev("d", `{}`))
	if err := b.Corrupt(ctx, s, id, 1, `{"active":`); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, 1} {
		_, err := s.ReadFrom(ctx, id, from, 0)
		var c *sessionlog.CorruptError
		if !errors.As(err, &c) || c.Seq != 1 || c.SessionID != id || !strings.Contains(err.Error(), fmt.Sprintf("session %q seq 1", id)) {
			t.Fatalf("read from %d over bad JSON: err = %v, want corruption at seq 1", from, err)
		}
	}
	if evs, err := s.ReadFrom(ctx, id, 2, 0); err != nil || len(evs) != 2 {
		t.Fatalf("read past the bad row: %v, %v", evs, err)
	}
	// A stored plan/mode that is valid JSON but not {active: bool} is corruption too.
	if err := b.Corrupt(ctx, s, id, 1, `{"active":42}`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFrom(ctx, id, 0, 0); !sessionlog.IsCorrupt(err) || !strings.Contains(err.Error(), "invalid active state 42") {
		t.Fatalf("read over bad plan/mode: err = %v", err)
	}
	if err := b.Corrupt(ctx, s, id, 1, `{"active":true}`); err != nil {
		t.Fatal(err)
	}
	b.checkMissingRowsReported(ctx, t, s, id)
}

// checkMissingRowsReported deletes rows 2 and 3 of corruptedRowReported's four-event session:
// a missing row, in the middle or at the end, is reported, never skipped.
func (b Backend) checkMissingRowsReported(ctx context.Context, t *testing.T, s sessionlog.Store, id string) {
	t.Helper()
	if err := b.Delete(ctx, s, id, 2); err != nil {
		t.Fatal(err)
	}
	var c *sessionlog.CorruptError
	if _, err := s.ReadFrom(ctx, id, 0, 0); !errors.As(err, &c) || c.Seq != 2 {
		t.Fatalf("read over a missing row: err = %v, want corruption at seq 2", err)
	}
	if err := b.Delete(ctx, s, id, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadFrom(ctx, id, 0, 0); !errors.As(err, &c) || c.Seq != 2 {
		t.Fatalf("read over missing trailing rows: err = %v, want corruption at seq 2", err)
	}
}

func (b Backend) fork(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	src := sid(t)
	completed := harness.TurnCompleted
	mustAppend(t, s, src,
		harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}), // 0
		harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 1}),    // 1
		harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: 1, Step: 1}),
		harness.MustEvent(harness.TypeStepEnd, harness.StepEnd{Turn: 1, Step: 1}),
		harness.MustEvent(harness.TypeTurnEnd, harness.TurnEnd{Turn: 1, Reason: completed}), // 4
		harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: false}),            // 5: between turns, after the last turn/end
		harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 2}),                // 6
		harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}),             // 7: inside the open turn
	)
	claimFor(t, s, src, forkOwner)
	// Default boundary: through the last turn/end (seq 4); later plan/mode not inherited.
	tail, err := s.Fork(ctx, src, src+"-child", -1, forkChild)
	if err != nil {
		t.Fatal(err)
	}
	want := harness.EmptyTail()
	want.NextSeq, want.Active, want.LastPlanModeSeq, want.Turn, want.LastStepStartSeq = 5, true, 0, 1, 2
	if !reflect.DeepEqual(tail, want) {
		t.Fatalf("child tail = %s, want %s", fmtTail(tail), fmtTail(want))
	}
	if stored, _ := s.Tail(ctx, src+"-child"); !reflect.DeepEqual(stored, want) {
		t.Fatalf("stored child tail = %s, want %s", fmtTail(stored), fmtTail(want))
	}
	child := readAll(t, s, src+"-child")
	parent := readAll(t, s, src)
	if !reflect.DeepEqual(child, parent[:5]) {
		t.Fatalf("child events differ from the parent prefix")
	}
	info, err := s.Info(ctx, src+"-child")
	if err != nil || info.ParentSession != src || info.SeedLength != 5 || info.CreatedAt == 0 {
		t.Fatalf("child header = %+v, %v", info, err)
	}
	// The child continues at seq 5.
	mustAppend(t, s, src+"-child", harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 2}))

	// Explicit boundary between turns (seq 5): inherits the standalone plan/mode.
	tail, err = s.Fork(ctx, src, src+"-between", 5, forkChild)
	if err != nil || tail.Active || tail.NextSeq != 6 || tail.LastPlanModeSeq != 5 {
		t.Fatalf("fork through 5: %s, %v", fmtTail(tail), err)
	}
	checkForkRefusals(ctx, t, s, src)
	// A source with no completed turn forks to an empty child with a header.
	mustAppend(t, s, src+"-young", harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}))
	claimFor(t, s, src+"-young", forkOwner)
	tail, err = s.Fork(ctx, src+"-young", src+"-young-child", -1, forkChild)
	if err != nil || !reflect.DeepEqual(tail, harness.EmptyTail()) {
		t.Fatalf("fork of a session without turn/end: %s, %v", fmtTail(tail), err)
	}
	if info, err := s.Info(ctx, src+"-young-child"); err != nil || info.ParentSession != src+"-young" || info.SeedLength != 0 {
		t.Fatalf("empty child header = %+v, %v", info, err)
	}
}

// checkForkRefusals checks the forks of fork's source session src that must be refused and
// change nothing: through a seq inside an open turn, of a missing session, past the end, and
// onto the existing child.
func checkForkRefusals(ctx context.Context, t *testing.T, s sessionlog.Store, src string) {
	t.Helper()
	// A boundary inside an open turn is refused with the harness's wording.
	for _, boundary := range []int64{1, 2, 3, 6, 7} {
		turn := 1
		if boundary >= 6 {
			turn = 2
		}
		_, err := s.Fork(ctx, src, fmt.Sprintf("%s-open-%d", src, boundary), boundary, forkChild)
		wantMsg := fmt.Sprintf("fork boundary %d in session %q ends inside open turn %d", boundary, src, turn)
		if err == nil || err.Error() != wantMsg {
			t.Fatalf("fork through %d: err = %v, want %q", boundary, err, wantMsg)
		}
		if _, err := s.Info(ctx, fmt.Sprintf("%s-open-%d", src, boundary)); !errors.Is(err, sessionlog.ErrNotFound) {
			t.Fatalf("refused fork created the child: %v", err)
		}
	}
	if _, err := s.Fork(ctx, src+"-nobody", src+"-orphan", -1, forkChild); !errors.Is(err, sessionlog.ErrNotFound) {
		t.Fatalf("fork of a missing session: err = %v, want sessionlog.ErrNotFound", err)
	}
	if _, err := s.Fork(ctx, src, src+"-past", 8, forkChild); err == nil {
		t.Fatal("fork past the end was accepted")
	}
	// Forking onto an existing session is a conflict; nothing changes.
	if _, err := s.Fork(ctx, src, src+"-child", -1, forkChild); !sessionlog.IsConflict(err) {
		t.Fatalf("fork onto an existing session: err = %v, want conflict", err)
	}
	if n := len(readAll(t, s, src+"-child")); n != 6 {
		t.Fatalf("refused fork changed the child: %d events", n)
	}
}

func (b Backend) seedKeepsHeader(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := sid(t)
	info := sessionlog.SessionInfo{ID: id, CreatedAt: 1785406800000, ParentSession: "p", SeedLength: 2}
	if _, err := s.Seed(ctx, info, harness.Sequence(0, ev("a", `{}`), ev("b", `{}`)), sessionlog.Owner{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Info(ctx, id)
	if err != nil || got != info {
		t.Fatalf("info = %+v, %v; want %+v", got, err, info)
	}
	if _, err := s.Seed(ctx, info, nil, sessionlog.Owner{}); !sessionlog.IsConflict(err) {
		t.Fatalf("second seed: err = %v, want conflict", err)
	}
	if _, err := s.Seed(ctx, sessionlog.SessionInfo{ID: id + "-x"}, harness.Sequence(1, ev("a", `{}`)), sessionlog.Owner{}); !sessionlog.IsConflict(err) {
		t.Fatalf("seed not starting at 0: err = %v, want conflict", err)
	}
}

func fmtTail(t harness.Tail) string {
	told := "nil"
	if t.LastShown != nil {
		told = fmt.Sprint(*t.LastShown)
	}
	return fmt.Sprintf("{next:%d active:%v lastPlan:%d told:%s turn:%d open:%v step:%d stepOpen:%v lastStep:%d}",
		t.NextSeq, t.Active, t.LastPlanModeSeq, told, t.Turn, t.TurnOpen, t.Step, t.StepOpen, t.LastStepStartSeq)
}
