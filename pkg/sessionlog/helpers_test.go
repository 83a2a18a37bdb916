package sessionlog

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// The package's own tests share these small helpers with the conformance suite in
// sessionlogtest, which cannot be imported from here (it imports this package).

// testBackend is a backend the JSONL tests run against.
type testBackend struct {
	name string
	open func(t *testing.T) Store
}

func ev(typ, data string) harness.Event { return harness.Event{Type: typ, Data: json.RawMessage(data)} }

func mustAppend(t *testing.T, s Store, id string, events ...harness.Event) harness.Tail {
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

func readAll(t *testing.T, s Store, id string) []harness.Event {
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

func fmtTail(t harness.Tail) string {
	told := "nil"
	if t.LastShown != nil {
		told = fmt.Sprint(*t.LastShown)
	}
	return fmt.Sprintf("{next:%d active:%v lastPlan:%d told:%s turn:%d open:%v step:%d stepOpen:%v lastStep:%d}",
		t.NextSeq, t.Active, t.LastPlanModeSeq, told, t.Turn, t.TurnOpen, t.Step, t.StepOpen, t.LastStepStartSeq)
}
