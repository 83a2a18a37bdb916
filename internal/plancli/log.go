package plancli

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// StoreEnv is the environment variable that names the session-log store when --store is not
// given, the same in every binary. An environment variable keeps a PostgreSQL password out of
// shell history.
const StoreEnv = storeenv.Name

const logPage = 1000

type logFlags struct {
	store  string
	jsonl  bool
	follow bool
	// tail is the number of lines to show from the end (-1: all).
	tail int
}

// followPoll is how often log -f reads the store and the session for what is new.
const followPoll = 500 * time.Millisecond

func newLogCommand(o *Options) *cobra.Command {
	var f logFlags
	cmd := &cobra.Command{
		Use:   "log SESSION [-f] [--tail N] [--store URL] [--jsonl]",
		Short: "Show the plan-relevant events of the session log, or export it as harness JSONL",
		Long: `Show the plan-relevant events of the session's log, one per line (seq, time, type, summary):

  plan/mode                 the committed state changing (only the manager writes these)
  turn/start, turn/end      turns opening and closing (with the end reason)
  step/start, step/end      step boundaries
  request/header            summarised: reason, the plan state in force for that request (from
                            the plan/mode events before it in the log), the plan guidance it
                            carried (today's PlanModeConfig section, an earlier config's text by
                            digest and beginning, or none), the tools
  user/message              plan-mode notices (for example "The user switched this session to
                            plan mode.") and the messages people sent (kubectl plan message)
  tool/call, tool/result    exit_plan_mode calls and their results
  review                    a plan that awaits a decision (from the session's status: the
                            agent logs the call once the review is decided)

-f follows the log: after what is there, each new line as the agent and the manager write it,
until Ctrl-C. --tail N shows only the last N lines (with -f: then follows).

--jsonl writes the whole session instead, in the harness's JSONL format (the session header
line, then every event verbatim), for tools that read harness sessions.

The log lives in the session-log store, not in the Kubernetes API. The store is found, in
order, from --store URL, the ` + StoreEnv + ` environment variable, or the current kubeconfig
context (make run records it there; record yours once with kubectl plan use-store URL):

  sqlite:///abs/path/log.db
  postgres://user:password@host:5432/db?sslmode=disable

The store is only read: a SQLite file is opened read-only and a wrong path is an error, never a
new empty file; a PostgreSQL database without the log is an error too, never given a schema,
and a role with only SELECT grants can read it.

The session is looked up by the AgentSession's spec.sessionID, so this also needs "get" on
agentsessions.agents.harness.dev.`,
		Example: `  kubectl plan log demo
  kubectl plan log demo -f
  kubectl plan log demo --tail 20
  kubectl plan log demo --store sqlite:///var/lib/planmode/log.db
  PLANMODE_LOG_STORE=postgres://planmode@db:5432/planmode kubectl plan log demo
  kubectl plan log demo --jsonl > demo.session.jsonl`,
		Args: exactSession("log SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.log(cmd.Context(), args[0], f)
		},
	}
	cmd.Flags().StringVar(&f.store, "store", "", "Session-log store URL (default: $"+StoreEnv+", then the kubeconfig context's)")
	cmd.Flags().BoolVar(&f.jsonl, "jsonl", false, "Write the whole session as harness JSONL")
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "Follow the log: print new lines as they are written, until Ctrl-C")
	cmd.Flags().IntVar(&f.tail, "tail", -1, "Show only the last N lines (-1: all)")
	return cmd
}

func (o *Options) log(ctx context.Context, name string, f logFlags) error {
	if f.jsonl && (f.follow || f.tail >= 0) {
		return fmt.Errorf("--jsonl writes the whole session: leave out -f and --tail")
	}
	url, err := o.storeURL(f.store)
	if err != nil {
		return err
	}
	if url == "" {
		return noStoreError()
	}
	if err := o.complete(); err != nil {
		return err
	}
	as, err := o.get(ctx, name)
	if err != nil {
		return err
	}
	store, err := sessionlog.OpenReadOnly(ctx, url)
	if err != nil {
		return fmt.Errorf("cannot open the session-log store: %w", err)
	}
	defer func() { _ = store.Close() }()

	if _, err := store.Info(ctx, as.Spec.SessionID); errors.Is(err, sessionlog.ErrNotFound) {
		return fmt.Errorf("session %q (spec.sessionID of AgentSession %q) has no log in this store yet: has its agent started, and is --store the store the manager uses?", as.Spec.SessionID, name)
	} else if err != nil {
		return fmt.Errorf("read session %q from the log store: %w", as.Spec.SessionID, err)
	}
	if f.jsonl {
		return sessionlog.Export(ctx, store, as.Spec.SessionID, o.Streams.Out)
	}
	lw := &logWriter{out: o.Streams.Out, s: newSummariser(o.sectionInForce(ctx, as)), shownReviews: map[string]bool{}}
	from, err := lw.read(ctx, store, as.Spec.SessionID, 0, f.tail)
	if err != nil {
		return err
	}
	lw.review(as)
	if !f.follow {
		if lw.lines == 0 && f.tail != 0 {
			fmt.Fprintf(o.Streams.ErrOut, "session %q has no plan-relevant events yet\n", as.Spec.SessionID)
		}
		return nil
	}
	lw.printHeader() // at once, even with nothing to show yet (--tail 0)
	return o.followLog(ctx, name, store, as.Spec.SessionID, lw, from)
}

// followLog prints what is new in the log, and a plan as it comes to await a decision, until
// ctx ends (Ctrl-C: no error).
func (o *Options) followLog(ctx context.Context, name string, store sessionlog.Store, sessionID string, lw *logWriter, from int64) error {
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		next, err := lw.read(ctx, store, sessionID, from, -1)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		from = next
		as, err := o.get(ctx, name)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		lw.review(as)
	}
}

// logWriter prints the log's plan-relevant lines: SEQ, TIME, EVENT, DETAIL in fixed columns, so
// lines printed later (log -f) line up with the first.
type logWriter struct {
	out    io.Writer
	s      *summariser
	header bool
	lines  int
	// shownReviews are the reviews already printed as awaiting a decision.
	shownReviews map[string]bool
}

func (lw *logWriter) printHeader() {
	if !lw.header {
		fmt.Fprintf(lw.out, "%-6s  %-24s  %-14s  %s\n", "SEQ", "TIME", "EVENT", "DETAIL")
		lw.header = true
	}
}

func (lw *logWriter) line(seq, at, event, detail string) {
	lw.printHeader()
	fmt.Fprintf(lw.out, "%-6s  %-24s  %-14s  %s\n", seq, at, event, detail)
	lw.lines++
}

// read summarises the events from seq from on, printing only the last tail lines when tail is
// not negative; it returns the seq after the last event read.
func (lw *logWriter) read(ctx context.Context, store sessionlog.Store, sessionID string, from int64, tail int) (int64, error) {
	type row struct{ seq, at, event, detail string }
	var kept []row
	for {
		evs, err := store.ReadFrom(ctx, sessionID, from, logPage)
		if err != nil {
			return from, fmt.Errorf("read session %q from seq %d: %w", sessionID, from, err)
		}
		for _, ev := range evs {
			detail, ok := lw.s.summarise(ev)
			if !ok {
				continue
			}
			r := row{strconv.FormatInt(ev.Seq, 10), time.UnixMilli(ev.Time).UTC().Format("2006-01-02T15:04:05.000Z"), ev.Type, detail}
			if tail < 0 {
				lw.line(r.seq, r.at, r.event, r.detail)
				continue
			}
			kept = append(kept, r)
			if len(kept) > tail {
				kept = kept[1:]
			}
		}
		if len(evs) > 0 {
			from = evs[len(evs)-1].Seq + 1
		}
		if len(evs) < logPage {
			break
		}
	}
	for _, r := range kept {
		lw.line(r.seq, r.at, r.event, r.detail)
	}
	return from, nil
}

// review prints a line for a plan that awaits a decision, once per review: the agent logs its
// exit_plan_mode call only when the review is decided, so the log alone would not show it.
func (lw *logWriter) review(as *v1alpha1.AgentSession) {
	r := awaitingDecision(as)
	if r == nil || lw.shownReviews[r.ID] {
		return
	}
	lw.shownReviews[r.ID] = true
	at := "-"
	if r.RequestedAt != nil {
		at = r.RequestedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	lw.line("-", at, "review", fmt.Sprintf("%q (review %s, turn %d) awaits a decision: kubectl plan review %s",
		planTitle(r.Plan), r.ID, r.Turn, as.Name))
}

// sectionInForce reads the plan guidance text, to tell whether a request/header carried it.
// Without permission to read PlanModeConfigs the summary simply leaves that fact out.
func (o *Options) sectionInForce(ctx context.Context, as *v1alpha1.AgentSession) string {
	name := v1alpha1.DefaultPlanModeConfigName
	if c := as.Status.PlanMode.Config; c != nil && c.Name != "" {
		name = c.Name
	} else if as.Spec.PlanMode.ConfigRef != nil {
		name = as.Spec.PlanMode.ConfigRef.Name
	}
	cfg := &v1alpha1.PlanModeConfig{}
	if err := o.c.Get(ctx, types.NamespacedName{Namespace: as.Namespace, Name: name}, cfg); err != nil {
		return ""
	}
	return cfg.Spec.Section
}

type summariser struct {
	// section is today's plan guidance; a request carried it or not.
	section string
	// offParagraphs are the system prompt's paragraphs in requests made with plan mode off:
	// what a plan-mode request carries beyond them is the guidance in force for it, which may
	// be an earlier config's (the cluster keeps no config history; the log keeps the text).
	offParagraphs map[string]bool
	// active is the fold of the plan/mode events read so far: the plan state in force for the
	// next request, as the log has it.
	active bool
	// exitCalls are the callIds of exit_plan_mode calls, to pick out their results.
	exitCalls map[string]bool
}

func newSummariser(section string) *summariser {
	return &summariser{section: section, exitCalls: map[string]bool{}, offParagraphs: map[string]bool{}}
}

func (s *summariser) summarise(ev harness.Event) (string, bool) {
	var d map[string]json.RawMessage
	_ = json.Unmarshal(ev.Data, &d)
	num := func(k string) string { return strings.TrimSpace(string(d[k])) }
	switch ev.Type {
	case harness.TypePlanMode:
		var pm harness.PlanMode
		if err := json.Unmarshal(ev.Data, &pm); err != nil {
			return "invalid: " + string(ev.Data), true
		}
		s.active = pm.Active
		if pm.Active {
			return "plan mode on (active=true)", true
		}
		return "plan mode off (active=false)", true
	case harness.TypeTurnStart:
		return "turn " + num("turn"), true
	case harness.TypeTurnEnd:
		var r harness.TurnEndReason
		_ = json.Unmarshal(d["reason"], &r)
		return fmt.Sprintf("turn %s (%s)", num("turn"), orDash(r.Kind)), true
	case harness.TypeStepStart, harness.TypeStepEnd:
		return fmt.Sprintf("turn %s step %s", num("turn"), num("step")), true
	case harness.TypeRequestHeader:
		return s.header(ev.Data), true
	case harness.TypeUserMessage:
		return userMessage(ev.Data)
	case harness.TypeToolCall:
		var c harness.ToolCall
		if json.Unmarshal(ev.Data, &c) != nil || c.Name != harness.ExitToolName {
			return "", false
		}
		s.exitCalls[c.CallID] = true
		return fmt.Sprintf("%s (call %s, turn %s step %s)", c.Name, c.CallID, num("turn"), num("step")), true
	case harness.TypeToolResult:
		return s.exitResult(ev.Data)
	}
	return "", false
}

// userMessage summarises a user/message: a plugin's plan-mode notice, or a message a person
// sent (a prompt, or one steered in with kubectl plan message).
func userMessage(data json.RawMessage) (string, bool) {
	var m harness.UserMessage
	if json.Unmarshal(data, &m) != nil {
		return "", false
	}
	var text string
	for _, c := range m.Content {
		text += c.Text
	}
	switch m.Source.Kind {
	case harness.SourceKindPlugin:
		if m.Source.Summary != "" {
			text = m.Source.Summary
		}
		return fmt.Sprintf("%s %s (%s): %s", m.Source.Plugin, orDash(m.Source.Form), m.Source.Kind, text), true
	case harness.SourceKindUser:
		return fmt.Sprintf("message from the user: %q", abbreviate(text, 120)), true
	}
	return "", false
}

// exitResult summarises the tool/result of an exit_plan_mode call; other tools' results are
// left out.
func (s *summariser) exitResult(data json.RawMessage) (string, bool) {
	// Both shapes: the harness's (the call id in source.callId) and earlier operator releases'.
	r, ok := harness.ReadToolResult(data)
	if !ok || (!s.exitCalls[r.CallID] && r.ToolName != harness.ExitToolName) {
		return "", false
	}
	kind := "ok"
	if r.IsError {
		kind = "error"
	}
	return fmt.Sprintf("%s result (call %s, %s): %s", harness.ExitToolName, r.CallID, kind, abbreviate(r.Text, 120)), true
}

func (s *summariser) header(data json.RawMessage) string {
	var h struct {
		Reason string `json:"reason"`
		Header struct {
			System *string `json:"system"`
			Tools  []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"header"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return "invalid: " + abbreviate(string(data), 80)
	}
	parts := []string{"reason=" + orDash(h.Reason), "plan=" + planmode.OnOff(s.active)}
	if g := s.guidance(h.Header.System); g != "" {
		parts = append(parts, "guidance="+g)
	}
	names := make([]string, 0, len(h.Header.Tools))
	for _, t := range h.Header.Tools {
		names = append(names, t.Name)
	}
	parts = append(parts, "tools=["+strings.Join(names, ",")+"]")
	return strings.Join(parts, " ")
}

// guidance says which plan guidance a request's system prompt carried: today's config's
// section, or, once a plan-off request of the session has shown the prompt without guidance, the
// text beyond it (an earlier config's, identified by its digest and its beginning, or none).
// Without either it says what it cannot tell rather than guess.
func (s *summariser) guidance(system *string) string {
	today := s.section != "" && system != nil && strings.Contains(*system, s.section)
	if !s.active {
		if system != nil && !today {
			for _, p := range strings.Split(*system, "\n\n") {
				s.offParagraphs[p] = true
			}
		}
		if today {
			return "present although plan mode is off"
		}
		return ""
	}
	if today {
		return "current config"
	}
	if len(s.offParagraphs) == 0 || system == nil {
		if s.section == "" {
			return ""
		}
		return "not the current config (an earlier one, or none)"
	}
	var extra []string
	for _, p := range strings.Split(*system, "\n\n") {
		if !s.offParagraphs[p] {
			extra = append(extra, p)
		}
	}
	if len(extra) == 0 {
		return "none"
	}
	text := strings.Join(extra, "\n\n")
	sum := sha256.Sum256([]byte(text))
	if s.section == "" {
		return fmt.Sprintf("sha256:%x %q", sum[:4], abbreviate(text, 40))
	}
	return fmt.Sprintf("earlier config (sha256:%x, %q)", sum[:4], abbreviate(text, 40))
}

// readLive reads the session's log tail from the store at url (O(1) in the log's length), and
// the time of its last plan/mode.
func readLive(ctx context.Context, url, sessionID string) (*LiveTail, error) {
	store, err := sessionlog.OpenReadOnly(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("cannot open the session-log store: %w", err)
	}
	defer func() { _ = store.Close() }()
	t, err := store.Tail(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read the log tail of session %q: %w", sessionID, err)
	}
	live := &LiveTail{Active: t.Active, NextSeq: t.NextSeq, TurnOpen: t.TurnOpen, Turn: t.Turn, Step: t.Step,
		LastPlanModeSeq: t.LastPlanModeSeq, LastStepStartSeq: t.LastStepStartSeq}
	if t.LastPlanModeSeq >= 0 {
		evs, err := store.ReadFrom(ctx, sessionID, t.LastPlanModeSeq, 1)
		if err != nil {
			return nil, fmt.Errorf("read the last plan/mode of session %q: %w", sessionID, err)
		}
		if len(evs) == 1 {
			at := time.UnixMilli(evs[0].Time).UTC()
			live.LastPlanModeTime = &at
		}
	}
	return live, nil
}
