package harness_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// encoding is how the harness persists a scenario's log.
type encoding string

const (
	// plainLog: plain.yml turns packing and compression off; one event per JSONL line.
	plainLog encoding = "plain"
	// zstdLog: the harness's default persistence, session.jsonl.zstd: one zstd frame per
	// flushed batch, runs of assistant/chunk packed into storage rows.
	zstdLog encoding = "zstd"
)

// encodings are the persistences every scenario runs with.
var encodings = []encoding{plainLog, zstdLog}

// liveLog is what one run of a scenario through the real harness left: the log it wrote,
// as it wrote it, and what the driver said. It is held in memory: the run's directories
// belong to the test that ran it.
type liveLog struct {
	Scenario scenario
	Encoding encoding
	File     string // the log's base name (session.jsonl or session.jsonl.zstd)
	Raw      []byte // the log, as the harness wrote it
	Plain    []byte // Raw decompressed (Raw itself for a plain log): the harness's storage rows
	Lines    []driverLine
}

// header is the log's header line.
func (l *liveLog) header(t *testing.T) sessionlog.Header {
	t.Helper()
	var h sessionlog.Header
	if err := json.Unmarshal(l.Plain[:bytes.IndexByte(l.Plain, '\n')], &h); err != nil {
		t.Fatalf("%s: header: %v", l.File, err)
	}
	return h
}

func (l *liveLog) last(op string) driverLine {
	r := dshRun{Lines: l.Lines}
	return r.last(op)
}

// liveRuns memoizes scenario runs: each scenario runs once per encoding in a test binary's
// run, and every test that checks a live log (the scenario checks, the reference agent's
// shapes, the differential) reads that same run. The first test to ask runs it; others wait.
var liveRuns = struct {
	sync.Mutex
	m map[string]*liveRun
}{m: map[string]*liveRun{}}

type liveRun struct {
	once sync.Once
	log  *liveLog
}

// scenarioLog returns the log of scenario name run with enc, running it on first use.
func scenarioLog(t *testing.T, name string, enc encoding) *liveLog {
	t.Helper()
	var sc scenario
	for _, s := range loadScenarios(t) {
		if s.Name == name {
			sc = s
		}
	}
	if sc.Name == "" {
		t.Fatalf("scenario %s is missing", name)
	}
	liveRuns.Lock()
	r := liveRuns.m[name+"/"+string(enc)]
	if r == nil {
		r = &liveRun{}
		liveRuns.m[name+"/"+string(enc)] = r
	}
	liveRuns.Unlock()
	// A run that fails ends the test running it (t.Fatal); once.Do still returns, with no log.
	r.once.Do(func() { r.log = runScenario(t, sc, enc) })
	if r.log == nil {
		t.Fatalf("the run of scenario %s (%s log) failed in another test", name, enc)
	}
	return r.log
}

func runScenario(t *testing.T, sc scenario, enc encoding) *liveLog {
	t.Helper()
	overlays := []string{"driver.yml"}
	if enc == plainLog {
		overlays = []string{"plain.yml", "driver.yml"}
	}
	run := runDsh(t, dshOptions{Overlays: overlays, Env: []string{"PLANTEST_SCENARIO=" + sc.Path}, Model: newScriptedModel(t, sc.Model)})
	raw, err := os.ReadFile(run.Log)
	if err != nil {
		t.Fatal(err)
	}
	l := &liveLog{Scenario: sc, Encoding: enc, File: filepath.Base(run.Log), Raw: raw, Plain: raw, Lines: run.Lines}
	switch want := map[encoding]string{plainLog: "session.jsonl", zstdLog: "session.jsonl.zstd"}[enc]; {
	case l.File != want:
		t.Fatalf("the harness wrote %s; with the %s overlays it writes %s", l.File, enc, want)
	case enc == zstdLog:
		dec, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.Close()
		if l.Plain, err = dec.DecodeAll(raw, nil); err != nil {
			t.Fatalf("%s: %v", l.File, err)
		}
	}
	capture(t, sc.Name+strings.TrimPrefix(l.File, "session"), raw)
	return l
}

// parseEvents reads the events of a plain JSONL log (its header line aside).
func parseEvents(t *testing.T, raw []byte) []harness.Event {
	t.Helper()
	var evs []harness.Event
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		if i == 0 {
			continue
		}
		var ev harness.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		evs = append(evs, ev)
	}
	return evs
}
