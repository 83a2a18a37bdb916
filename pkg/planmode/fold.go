package planmode

import (
	"encoding/json"
	"fmt"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// Event types plan mode reads or writes (reference spec §2.2).
const (
	EventPlanMode      = sessionlog.TypePlanMode
	EventTurnStart     = sessionlog.TypeTurnStart
	EventTurnEnd       = sessionlog.TypeTurnEnd
	EventStepStart     = sessionlog.TypeStepStart
	EventStepEnd       = sessionlog.TypeStepEnd
	EventUserMessage   = sessionlog.TypeUserMessage
	EventRequestHeader = sessionlog.TypeRequestHeader
)

// PlanModeData is the exact plan/mode payload: {active: bool}.
type PlanModeData struct {
	Active bool `json:"active"`
}

// PlanModeEvent builds the plan/mode event the reconciler appends at seq.
func PlanModeEvent(seq int64, active bool) sessionlog.Event {
	data, _ := json.Marshal(PlanModeData{Active: active}) // cannot fail for a bool
	return sessionlog.Event{Type: EventPlanMode, Seq: seq, Data: data}
}

// DecodePlanMode reads a plan/mode payload strictly: exactly {active: bool}.
func DecodePlanMode(data json.RawMessage) (bool, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return false, fmt.Errorf("plan/mode data is not a JSON object: %w", err)
	}
	raw, ok := m["active"]
	if !ok || len(m) != 1 {
		return false, fmt.Errorf("plan/mode data must be exactly {active: boolean}, got %s", string(data))
	}
	var active bool
	if err := json.Unmarshal(raw, &active); err != nil {
		return false, fmt.Errorf("plan/mode carries invalid active state %s; expected a boolean", string(raw))
	}
	return active, nil
}

// FoldPlanMode is the harness's foldPlanMode(events): the last plan/mode wins, a log with
// none folds to inactive. Malformed plan/mode payloads are skipped (the store refuses them).
func FoldPlanMode(events []sessionlog.Event) bool {
	return FoldPlanModeTo(events, len(events))
}

// FoldPlanModeTo is foldPlanMode(events, end): the fold of events[0:end] (end exclusive,
// clamped to the log).
func FoldPlanModeTo(events []sessionlog.Event, end int) bool {
	if end > len(events) {
		end = len(events)
	}
	active := false
	for i := 0; i < end; i++ {
		if events[i].Type != EventPlanMode {
			continue
		}
		if a, err := DecodePlanMode(events[i].Data); err == nil {
			active = a
		}
	}
	return active
}

// PlanModeAtLastHeader is the harness's planModeAtLastHeader(events): nil when the log has no
// request/header, else the fold through the last header (inclusive). A header records no plan
// field; what it "described" is positional.
func PlanModeAtLastHeader(events []sessionlog.Event) *bool {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == EventRequestHeader {
			told := FoldPlanModeTo(events, i+1)
			return &told
		}
	}
	return nil
}

// HasOpenTurn is the harness's hasOpenTurn(events): the last turn/start has no later turn/end.
func HasOpenTurn(events []sessionlog.Event) bool {
	for i := len(events) - 1; i >= 0; i-- {
		switch events[i].Type {
		case EventTurnEnd:
			return false
		case EventTurnStart:
			return true
		}
	}
	return false
}
