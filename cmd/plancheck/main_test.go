package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

func run1(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCmd(&out, &errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func ev(typ, data string) harness.Event {
	return harness.Event{Type: typ, Data: json.RawMessage(data)}
}

// seed stores a log: a clean turn, then (bad) a duplicate plan/mode and one inside a step.
func seed(t *testing.T, url string, bad bool) {
	t.Helper()
	s, err := sessionlog.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	evs := []harness.Event{
		ev("turn/start", `{"turn":1}`),
		ev("step/start", `{"turn":1,"step":1}`),
		ev("request/header", `{"header":{},"reason":"initial"}`),
		ev("step/end", `{"turn":1,"step":1}`),
		ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`),
		ev("plan/mode", `{"active":true}`),
	}
	if bad {
		evs = append(evs,
			ev("plan/mode", `{"active":true}`),
			ev("turn/start", `{"turn":2}`),
			ev("step/start", `{"turn":2,"step":1}`),
			ev("plan/mode", `{"active":false}`),
		)
	}
	if _, err := s.Seed(context.Background(), sessionlog.SessionInfo{ID: "s1", CreatedAt: 1}, harness.Sequence(0, evs...), sessionlog.Owner{}); err != nil {
		t.Fatal(err)
	}
}

func TestCleanLog(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "log.db")
	seed(t, url, false)
	out, err := run1(t, "--store", url, "--session", "s1")
	if err != nil || out != "session \"s1\": 6 events, 0 acks checked, 0 violations\n" {
		t.Fatalf("out %q, err %v", out, err)
	}
}

func TestViolationsAndAcks(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + filepath.Join(dir, "log.db")
	seed(t, url, true)
	acks := filepath.Join(dir, "acks.jsonl")
	// An ack claiming plan mode off at seq 5 (the log folds to false before seq 5: fine) and one
	// claiming a plan/mode appended at seq 6 with active false (the log holds true there).
	if err := os.WriteFile(acks, []byte(`{"turn":1,"step":2,"seq":5,"result":"Failed","active":false,"nextSeq":5}
{"turn":2,"step":1,"seq":6,"result":"Admitted","active":false,"nextSeq":7}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run1(t, "--store", url, "--session", "s1", "--acks", acks)
	if !errors.Is(err, errViolations) {
		t.Fatalf("err %v, want violations\n%s", err, out)
	}
	for _, want := range []string{
		"seq 6: DuplicatePlanMode:",
		"seq 9: PlanModeInsideStep:",
		"seq 5: NoticeMissing:",
		"seq 6: AckStateNotInLog:",
		"session \"s1\": 10 events, 2 acks checked, 4 violations",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = run1(t, "--store", url, "--session", "s1", "--json")
	var vs []invariant.Violation
	if !errors.Is(err, errViolations) || json.Unmarshal([]byte(out), &vs) != nil || len(vs) != 3 || vs[0].Kind != invariant.Duplicate || vs[0].Seq != 6 {
		t.Fatalf("--json: %v %v\n%s", err, vs, out)
	}
}

func TestBadInvocations(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "log.db")
	seed(t, url, false)
	bad := filepath.Join(t.TempDir(), "acks")
	_ = os.WriteFile(bad, []byte(`{"turn":1,"bogus":2}`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--session", "s1"}, "--store is required"},
		{[]string{"--store", url}, "--session is required"},
		{[]string{"--store", url, "--name", "x"}, "--name needs --namespace"},
		{[]string{"--store", url, "--session", "nope"}, `session "nope": session not found`},
		{[]string{"--store", url, "--session", "s1", "--acks", bad}, "line 1"},
		{[]string{"--store", "postgres://u:hunter2@127.0.0.1:1/x?connect_timeout=1", "--session", "s1"}, ""},
	} {
		_, err := run1(t, c.args...)
		if err == nil || errors.Is(err, errViolations) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want one containing %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: the error shows the password: %v", c.args, err)
		}
	}
}

func TestVersionAndReadOnlyStore(t *testing.T) {
	var out, errOut strings.Builder
	cmd := newRootCmd(&out, &errOut)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil || !strings.HasPrefix(out.String(), "plancheck ") {
		t.Fatalf("plancheck --version = %q, %v", out.String(), err)
	}
	typo := filepath.Join(t.TempDir(), "typo.db")
	cmd = newRootCmd(&out, &errOut)
	cmd.SetArgs([]string{"--store", "sqlite://" + typo, "--session", "s"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "no SQLite session log at "+typo) {
		t.Fatalf("plancheck on a missing store: %v", err)
	}
	if _, err := os.Stat(typo); err == nil {
		t.Fatal("plancheck created the store file it was asked to read")
	}
}

// TestRealHarnessLog checks the real harness's log of an approved plan (test/harness scenario
// A), imported with planlog's import: the approved exit owes no notice (no NoticeMissing, the
// false positive the checker gave on the harness's tool/result shape), and the one verdict is
// the NoticeNotOwed rc.8 earns by keeping a queued notice a later idle /plan off reversed.
func TestRealHarnessLog(t *testing.T) {
	raw, err := os.ReadFile("../../pkg/sessionlog/testdata/harness/A_idle_review_approve.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	url := "sqlite://" + filepath.Join(t.TempDir(), "log.db")
	s, err := sessionlog.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	info, _, err := sessionlog.Import(context.Background(), s, bytes.NewReader(raw), sessionlog.ImportOptions{})
	_ = s.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := run1(t, "--store", url, "--session", info.ID, "--json")
	var vs []invariant.Violation
	if !errors.Is(err, errViolations) || json.Unmarshal([]byte(out), &vs) != nil || len(vs) != 1 || vs[0].Kind != invariant.NoticeNotOwed {
		t.Fatalf("plancheck on the real log: %v\n%s", err, out)
	}
}

// Whatever form the store's connection string has, a failure never prints its password.
func TestStoreErrorsNeverShowThePassword(t *testing.T) {
	for _, url := range []string{
		"postgres://planmode:s3cret@127.0.0.1:1/log?sslmode=disable&connect_timeout=1",
		"postgres://planmode@127.0.0.1:1/log?sslmode=disable&password=s3cret&connect_timeout=1",
		"host=127.0.0.1 port=1 user=planmode password=s3cret dbname=log",
		"sqlite:///nonexistent/log.db?password=s3cret",
	} {
		out, err := run1(t, "--store", url, "--session", "x")
		if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(out, "s3cret") {
			t.Errorf("plancheck: %q, %v", out, err)
		}
	}
}
