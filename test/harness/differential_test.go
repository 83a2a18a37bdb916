package harness_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
)

// The differential: the same sequence of prompts, steps and toggles, once through the real
// harness (a scenario) and once through the operator (the real manager and the reference
// agent on the SDK), projected onto the plan-mode vocabulary both write, ids and times aside.
// Where the semantics agree the projections are equal; where they differ, both are pinned and
// docs/harness-oracle.md says why.

// projection labels a log's plan-mode events: turn/step events, plan/mode with its state,
// user prompts, plan-mode notices (with their text), request headers with their reason and
// whether they carry the plan section, tool calls and results. Everything else (streamed
// chunks, inbox splices, commands, the harness's runtime-context snapshots, retries) is left
// out: only one side writes it.
func projection(evs []harness.Event) string {
	var out []string
	for _, ev := range evs {
		switch ev.Type {
		case harness.TypeTurnStart, harness.TypeTurnEnd, harness.TypeStepStart, harness.TypeStepEnd, harness.TypeToolCall, harness.TypeToolResult:
			out = append(out, ev.Type)
		case harness.TypePlanMode:
			var d harness.PlanMode
			_ = ev.Decode(&d)
			out = append(out, "plan/mode="+strings.TrimSpace(string(mustJSON(d.Active))))
		case harness.TypeUserMessage:
			var d harness.UserMessage
			_ = ev.Decode(&d)
			switch {
			case d.Source.Kind == harness.SourceKindUser:
				out = append(out, "prompt")
			case d.Source.Plugin == harness.NoticeSourcePlugin:
				out = append(out, "notice("+planmodeWord(d.Source.Summary)+")")
			}
		case harness.TypeRequestHeader:
			var d harness.RequestHeader
			_ = ev.Decode(&d)
			mode := "default"
			if strings.Contains(d.Header.System, planSectionMarker) {
				mode = "plan"
			}
			out = append(out, "header("+d.Reason+","+mode+")")
		}
	}
	return strings.Join(out, " · ")
}

func planmodeWord(notice string) string {
	switch notice {
	case harness.NoticePlanOn:
		return "on"
	case harness.NoticeDefault:
		return "off"
	}
	return notice
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

type differentialCase struct {
	name     string
	scenario string
	// operator drives the same sequence through the operator for session name.
	operator func(t *testing.T, op *operatorEnv, c *agentsdk.Client, name string)
	// want is the projection both give; wantHarness and wantOperator pin them where they
	// differ.
	want, wantHarness, wantOperator string
}

func TestDifferential(t *testing.T) {
	t.Parallel()
	op := startOperator(t)
	for _, tc := range []differentialCase{{
		// /plan while step 1's request is in flight; /plan off then /plan during step 2.
		name: "toggle-mid-turn", scenario: "C_toggle_mid_turn",
		operator: func(t *testing.T, op *operatorEnv, c *agentsdk.Client, name string) {
			runScriptWith(t, c, "turn Look at README.md\nstep\ntool read\nstep\ntool read\nstep\nend\n", func(r refagent.StepRecord) {
				switch {
				case r.Turn == 1 && r.Step == 1:
					op.toggle(t, name, true)
					awaitPending(t, c, true)
				case r.Turn == 1 && r.Step == 2:
					op.toggle(t, name, false)
					awaitPending(t, c, false)
					op.toggle(t, name, true)
					waitFor(t, c, "the flip back nets out", settled(true))
				}
			})
		},
		want: "turn/start · step/start · prompt · header(initial,default) · tool/call · tool/result · step/end · " +
			"plan/mode=true · step/start · notice(on) · header(change,plan) · tool/call · tool/result · step/end · " +
			"step/start · step/end · turn/end",
	}, {
		// /plan while a request that fails with HTTP 500 is in flight: the retry is no boundary.
		name: "toggle-during-retry", scenario: "E_toggle_during_retry",
		operator: func(t *testing.T, op *operatorEnv, c *agentsdk.Client, name string) {
			runScriptWith(t, c, "turn Look at README.md\nstep\nretry\ntool read\nstep\nend\n", func(r refagent.StepRecord) {
				if r.Turn == 1 && r.Step == 1 {
					op.toggle(t, name, true)
					awaitPending(t, c, true)
				}
			})
		},
		want: "turn/start · step/start · prompt · header(initial,default) · tool/call · tool/result · step/end · " +
			"plan/mode=true · step/start · notice(on) · header(change,plan) · step/end · turn/end",
	}, {
		// /plan while the turn's last step is in flight: no later boundary in that turn.
		name: "toggle-after-last-boundary", scenario: "D_toggle_after_last_boundary",
		operator: func(t *testing.T, op *operatorEnv, c *agentsdk.Client, name string) {
			runScriptWith(t, c, "turn Answer briefly\nstep\nend\n", func(r refagent.StepRecord) {
				if r.Turn == 1 && r.Step == 1 {
					op.toggle(t, name, true)
					awaitPending(t, c, true)
				}
			})
			// Protocol v2: the selection stays pending past turn/end and is appended at the
			// next turn's first step boundary, where the harness appends it too.
			awaitPending(t, c, true)
			runScriptWith(t, c, "turn Next question\nstep\nend\n", nil)
		},
		want: "turn/start · step/start · prompt · header(initial,default) · step/end · turn/end · " +
			"turn/start · plan/mode=true · step/start · prompt · notice(on) · header(change,plan) · step/end · turn/end",
	}, {
		// /plan between two turns, while idle.
		name: "idle-toggle", scenario: "F_idle_toggle_between_turns",
		operator: func(t *testing.T, op *operatorEnv, c *agentsdk.Client, name string) {
			runScriptWith(t, c, "turn first\nstep\nend\n", nil)
			op.toggle(t, name, true)
			waitFor(t, c, "the manager commits the selection idle", settled(true))
			runScriptWith(t, c, "turn second\nstep\nend\n", nil)
		},
		wantHarness: "turn/start · step/start · prompt · header(initial,default) · step/end · turn/end · " +
			"plan/mode=true · turn/start · step/start · notice(on) · prompt · header(change,plan) · step/end · turn/end",
		wantOperator: "turn/start · step/start · prompt · header(initial,default) · step/end · turn/end · " +
			"plan/mode=true · turn/start · step/start · prompt · notice(on) · header(change,plan) · step/end · turn/end",
	}, {
		// /plan then /plan off between two turns: the second reverses the first.
		name: "idle-toggle-reversed", scenario: "G_idle_toggle_reversed",
		operator: func(t *testing.T, op *operatorEnv, c *agentsdk.Client, name string) {
			runScriptWith(t, c, "turn first\nstep\nend\n", nil)
			op.toggle(t, name, true)
			waitFor(t, c, "the manager commits plan mode idle", settled(true))
			op.toggle(t, name, false)
			waitFor(t, c, "the manager commits the default mode idle", settled(false))
			runScriptWith(t, c, "turn second\nstep\nend\n", nil)
		},
		wantHarness: "turn/start · step/start · prompt · header(initial,default) · step/end · turn/end · " +
			"plan/mode=true · plan/mode=false · turn/start · step/start · notice(on) · prompt · step/end · turn/end",
		wantOperator: "turn/start · step/start · prompt · header(initial,default) · step/end · turn/end · " +
			"plan/mode=true · plan/mode=false · turn/start · step/start · prompt · step/end · turn/end",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// The scenario's plain log from this run of the suite (TestRealHarness checks the
			// same run).
			hevs := parseEvents(t, scenarioLog(t, tc.scenario, plainLog).Raw)
			c := op.session(t, tc.name, nil)
			tc.operator(t, op, c, tc.name)
			oevs, err := op.store.ReadFrom(context.Background(), op.ns+"."+tc.name, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			gotH, gotO := projection(hevs), projection(oevs)
			t.Logf("harness:  %s\noperator: %s", gotH, gotO)
			wantH, wantO := tc.wantHarness, tc.wantOperator
			if tc.want != "" {
				wantH, wantO = tc.want, tc.want
			}
			if gotH != wantH {
				t.Errorf("harness:\n got %s\nwant %s", gotH, wantH)
			}
			if gotO != wantO {
				t.Errorf("operator:\n got %s\nwant %s", gotO, wantO)
			}
		})
	}
}

// settled is the condition that the manager took on selection active with nothing pending.
func settled(active bool) func(*v1alpha1.AgentSession) bool {
	return func(s *v1alpha1.AgentSession) bool {
		sel := s.Status.PlanMode.Selection
		return sel != nil && *sel == active && !s.Status.PlanMode.Pending
	}
}

// awaitPending waits until the manager queued a selection of active for the next boundary.
func awaitPending(t *testing.T, c *agentsdk.Client, active bool) {
	t.Helper()
	waitFor(t, c, "the manager queues the selection", func(s *v1alpha1.AgentSession) bool {
		pm := s.Status.PlanMode
		return pm.Pending && pm.PendingActive != nil && *pm.PendingActive == active
	})
}

func runScriptWith(t *testing.T, c *agentsdk.Client, script string, onStep func(refagent.StepRecord)) {
	t.Helper()
	s, err := refagent.ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refagent.Run(context.Background(), refagent.Options{Client: c, Script: s, BoundaryTimeout: 30 * time.Second, OnStep: onStep}); err != nil {
		t.Fatalf("reference agent: %v", err)
	}
}
