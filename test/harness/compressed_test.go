package harness_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// TestCompressedLog runs a scenario with the harness's default persistence: zstd, one frame
// per flushed batch, assistant/chunk runs packed into storage rows. The log imports without
// flags, holds every event the harness counted, and the harness resumes its export with the
// same plan state.
func TestCompressedLog(t *testing.T) {
	t.Parallel()
	var sc scenario
	for _, s := range loadScenarios(t) {
		if s.Name == "A_idle_review_approve" {
			sc = s
		}
	}
	if sc.Name == "" {
		t.Fatal("scenario A_idle_review_approve is missing")
	}
	model := newScriptedModel(t, sc.Model)
	run := runDsh(t, dshOptions{Overlays: []string{"driver.yml"}, Env: []string{"PLANTEST_SCENARIO=" + sc.Path}, Model: model})
	if !strings.HasSuffix(run.Log, ".jsonl.zstd") {
		t.Fatalf("the harness's default log is %s; expected session.jsonl.zstd", filepath.Base(run.Log))
	}
	raw, err := os.ReadFile(run.Log)
	if err != nil {
		t.Fatal(err)
	}
	capture(t, sc.Name+".jsonl.zstd", raw)
	// What this test exercises: several frames, packed rows.
	if n := bytes.Count(raw, []byte{0x28, 0xb5, 0x2f, 0xfd}); n < 2 {
		t.Fatalf("the log holds %d zstd frame magics; expected several frames", n)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := dec.DecodeAll(raw, nil)
	dec.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(plain, []byte(`{"type":"text-chunks","seq0":`)) && !bytes.Contains(plain, []byte(`{"type":"tool-call-chunks","seq0":`)) {
		t.Fatal("the log holds no packed chunk rows")
	}

	store := openStore(t)
	info, tail, err := sessionlog.Import(context.Background(), store, bytes.NewReader(raw), sessionlog.ImportOptions{})
	if err != nil {
		t.Fatalf("import of the harness's compressed log: %v", err)
	}
	done := run.last("done")
	if tail.NextSeq != done.Seq || tail.Active != done.Get.Active {
		t.Fatalf("imported tail: next seq %d, active %v; the harness: seq %d, active %v", tail.NextSeq, tail.Active, done.Seq, done.Get.Active)
	}
	checkResume(t, store, info.ID, tail.Active)
}
