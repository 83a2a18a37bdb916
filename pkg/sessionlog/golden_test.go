package sessionlog

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// goldenFile holds the store's golden vectors, shared with the TypeScript store of
// agents/dsh-plugin: both must store, refuse and fold the same batches the same way.
const goldenFile = "testdata/golden/appends.json"

type goldenTail struct {
	NextSeq          int64 `json:"nextSeq"`
	Active           bool  `json:"active"`
	LastPlanModeSeq  int64 `json:"lastPlanModeSeq"`
	LastShown        *bool `json:"told"`
	TurnOpen         bool  `json:"turnOpen"`
	Turn             int64 `json:"turn"`
	LastStepStartSeq int64 `json:"lastStepStartSeq"`
	Step             int64 `json:"step"`
	StepOpen         bool  `json:"stepOpen"`
}

type goldenStep struct {
	Append []harness.Event `json:"append"`
	Want   struct {
		Tail     *goldenTail `json:"tail"`
		Conflict *struct {
			Expected int64 `json:"expected"`
			Got      int64 `json:"got"`
		} `json:"conflict"`
		Invalid *struct {
			Seq   int64  `json:"seq"`
			Type  string `json:"type"`
			Field string `json:"field"`
		} `json:"invalid"`
	} `json:"want"`
}

type goldenCase struct {
	Name   string       `json:"name"`
	Steps  []goldenStep `json:"steps"`
	Events []string     `json:"events"`
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	raw, err := os.ReadFile(filepath.FromSlash(goldenFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []goldenCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", goldenFile, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s has no cases", goldenFile)
	}
	return f.Cases
}

func toGolden(t harness.Tail) goldenTail {
	return goldenTail{NextSeq: t.NextSeq, Active: t.Active, LastPlanModeSeq: t.LastPlanModeSeq, LastShown: t.LastShown, TurnOpen: t.TurnOpen,
		Turn: t.Turn, LastStepStartSeq: t.LastStepStartSeq, Step: t.Step, StepOpen: t.StepOpen}
}

func (g goldenTail) String() string {
	b, _ := json.Marshal(g)
	return string(b)
}

// TestGoldenVectors runs the shared vectors against both backends: the tail after every
// accepted batch (and the one Tail reads back), the conflict or validation error of every
// refused one, and the stored event types at the end.
func TestGoldenVectors(t *testing.T) {
	cases := loadGolden(t)
	backends := []struct {
		name string
		open func(t *testing.T) Store
	}{
		{"sqlite", func(t *testing.T) Store {
			s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "log.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"postgres", func(t *testing.T) Store {
			s, err := OpenPostgres(context.Background(), postgresDB(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t)
			ctx := context.Background()
			for ci, c := range cases {
				id := "golden-" + string(rune('a'+ci))
				for si, st := range c.Steps {
					tail, err := s.Append(ctx, id, st.Append)
					switch w := st.Want; {
					case w.Tail != nil:
						if err != nil {
							t.Fatalf("%s step %d: %v", c.Name, si, err)
						}
						if got := toGolden(tail); got.String() != w.Tail.String() {
							t.Errorf("%s step %d: tail %s, want %s", c.Name, si, got, w.Tail)
						}
						read, err := s.Tail(ctx, id)
						if err != nil {
							t.Fatal(err)
						}
						if got := toGolden(read); got.String() != w.Tail.String() {
							t.Errorf("%s step %d: Tail() reads %s, want %s", c.Name, si, got, w.Tail)
						}
					case w.Conflict != nil:
						var ce *ConflictError
						if !errors.As(err, &ce) || ce.Expected != w.Conflict.Expected || ce.Got != w.Conflict.Got {
							t.Errorf("%s step %d: got %v, want a conflict expected %d got %d", c.Name, si, err, w.Conflict.Expected, w.Conflict.Got)
						}
					case w.Invalid != nil:
						var ve *ValidationError
						if !errors.As(err, &ve) || ve.Seq != w.Invalid.Seq || ve.Type != w.Invalid.Type || ve.Field != w.Invalid.Field {
							t.Errorf("%s step %d: got %#v (%v), want a validation error at seq %d %q field %q", c.Name, si, ve, err, w.Invalid.Seq, w.Invalid.Type, w.Invalid.Field)
						}
					default:
						t.Fatalf("%s step %d: the vector names no outcome", c.Name, si)
					}
				}
				evs, err := s.ReadFrom(ctx, id, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				types := make([]string, 0, len(evs))
				for _, e := range evs {
					types = append(types, e.Type)
				}
				if g, w := mustJSON(types), mustJSON(c.Events); g != w {
					t.Errorf("%s: stored %s, want %s", c.Name, g, w)
				}
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
