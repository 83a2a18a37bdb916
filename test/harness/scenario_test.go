package harness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/internal/chatmodel"
)

// scenario is one scripted session: what the model answers, how reviews are answered, and
// what the driver does (testdata/scenarios/*.json).
type scenario struct {
	Name    string
	About   string            `json:"about"`
	Model   []chatmodel.Reply `json:"model"`
	Reviews []json.RawMessage `json:"reviews"`
	Steps   []json.RawMessage `json:"steps"`
	Path    string
}

func loadScenarios(t *testing.T) []scenario {
	t.Helper()
	files, err := filepath.Glob("testdata/scenarios/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/scenarios (%v)", err)
	}
	out := make([]scenario, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s scenario
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		s.Name = strings.TrimSuffix(filepath.Base(f), ".json")
		s.Path, _ = filepath.Abs(f)
		out = append(out, s)
	}
	return out
}
