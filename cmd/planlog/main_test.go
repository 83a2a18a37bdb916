package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

const fixture = "../../pkg/sessionlog/testdata/spec-examples.jsonl"

func run(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCmd(strings.NewReader(stdin), &out, &errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// onBothStores runs f on a fresh SQLite file and a PostgreSQL database, with the fixture.
func onBothStores(t *testing.T, f func(t *testing.T, store string, fixture []byte)) {
	t.Helper()
	want, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	pg := pgtest.MustStart(t)
	for name, store := range map[string]string{
		"sqlite":   "sqlite://" + filepath.Join(t.TempDir(), "log.db"),
		"postgres": pg.URL,
	} {
		t.Run(name, func(t *testing.T) { f(t, store, want) })
	}
}

func TestImportExportTail(t *testing.T) {
	onBothStores(t, func(t *testing.T, store string, want []byte) {
		out, err := run(t, string(want), "import", "--store", store)
		if err != nil || out != "imported session \"spec-examples\": 20 events\n" {
			t.Fatalf("import: %q, %v", out, err)
		}
		out, err = run(t, "", "export", "--store", store, "--session", "spec-examples")
		if err != nil || out != string(want) {
			t.Fatalf("export differs from the imported file (%v):\n%s", err, out)
		}
		out, err = run(t, "", "tail", "--store", store, "--session", "spec-examples")
		if err != nil {
			t.Fatal(err)
		}
		var tail tailJSON
		if err := json.Unmarshal([]byte(out), &tail); err != nil {
			t.Fatalf("tail output %q: %v", out, err)
		}
		if tail.NextSeq != 20 || !tail.Active || tail.LastShown == nil || !*tail.LastShown || !tail.TurnOpen || tail.Turn != 2 || tail.Step != 1 || tail.LastPlanModeSeq != 8 {
			t.Fatalf("tail = %s", out)
		}
		// The session may be given as kubectl-style positional argument.
		if positional, err := run(t, "", "tail", "--store", store, "spec-examples"); err != nil || positional != out {
			t.Fatalf("tail SESSION = %q, %v; want the --session output", positional, err)
		}
		// Importing again is refused, and the error says why.
		if _, err := run(t, string(want), "import", "--store", store); err == nil || !strings.Contains(err.Error(), "seq conflict") {
			t.Fatalf("second import: %v", err)
		}
		if _, err := run(t, string(want), "import", "--store", store, "--session", "renamed"); err != nil {
			t.Fatal(err)
		}
		out, _ = run(t, "", "export", "--store", store, "--session", "renamed")
		if !strings.HasPrefix(out, `{"type":"session","version":0,"id":"renamed",`) {
			t.Fatalf("renamed export header: %.80s", out)
		}
	})
}

func TestErrors(t *testing.T) {
	t.Setenv(storeEnv, "")
	dir := t.TempDir()
	store := "sqlite://" + filepath.Join(dir, "log.db")
	created, err := sessionlog.Open(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	_ = created.Close()
	typo := filepath.Join(dir, "lgo.db")
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"export", "--session", "s"}, "no store: pass --store URL or set $PLANMODE_LOG_STORE"},
		{"", []string{"export", "--store", "sqlite://" + typo, "--session", "s"}, "no SQLite session log at " + typo},
		{"", []string{"tail", "--store", "sqlite://" + typo, "--session", "s"}, "no SQLite session log at " + typo},
		{"", []string{"export", "--store", store}, "--session is required"},
		{"", []string{"export", "--store", store, "--session", "missing"}, `session "missing": session not found`},
		{"", []string{"tail", "--store", store, "--session", "missing"}, "session not found"},
		{"", []string{"tail", "--store", store, "a", "--session", "b"}, `two sessions: "a" and --session "b"`},
		{"", []string{"export", "--store", "ftp://x", "--session", "s"}, "unknown store URL"},
		{`{"type":"session","version":3,"id":"s","createdAt":1}`, []string{"import", "--store", store}, "line 1: unsupported session format version 3"},
	} {
		if _, err := run(t, c.stdin, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%v: err = %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(typo); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading a mistyped store created %s: %v", typo, err)
	}
	t.Setenv(storeEnv, store)
	if _, err := run(t, "", "export", "--session", "missing"); err == nil || !strings.Contains(err.Error(), "session not found") {
		t.Fatalf("store from $%s not used: %v", storeEnv, err)
	}
}

func TestVersion(t *testing.T) {
	out, err := run(t, "", "--version")
	if err != nil || !strings.HasPrefix(out, "planlog ") {
		t.Fatalf("planlog --version = %q, %v", out, err)
	}
}

// TestImportRealHarnessLogs: the real harness's logs, plain and in its default zstd encoding,
// import without flags; export with --cwd gives back the plain log byte for byte.
func TestImportRealHarnessLogs(t *testing.T) {
	const plainLog = "../../pkg/sessionlog/testdata/harness/A_idle_review_approve.jsonl"
	plain, err := os.ReadFile(plainLog)
	if err != nil {
		t.Fatal(err)
	}
	z, err := os.ReadFile(plainLog + ".zstd")
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct{ ID, Cwd string }
	if err := json.Unmarshal(plain[:bytes.IndexByte(plain, '\n')], &hdr); err != nil {
		t.Fatal(err)
	}
	store := "sqlite://" + filepath.Join(t.TempDir(), "log.db")
	out, err := run(t, string(plain), "import", "--store", store)
	if err != nil || out != fmt.Sprintf("imported session %q: %d events\n", hdr.ID, bytes.Count(plain, []byte("\n"))-1) {
		t.Fatalf("import of the plain log: %q, %v", out, err)
	}
	out, err = run(t, "", "export", "--store", store, "--session", hdr.ID, "--cwd", hdr.Cwd)
	if err != nil || out != string(plain) {
		t.Fatalf("export differs from the harness's log (%v)", err)
	}
	out, err = run(t, string(z), "import", "--store", store)
	if err != nil || !strings.HasPrefix(out, "imported session \"session-") {
		t.Fatalf("import of the zstd log: %q, %v", out, err)
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
		for _, args := range [][]string{{"tail", "--session", "x"}, {"export", "--session", "x"}, {"import"}} {
			_, err := run(t, "", append(args, "--store", url)...)
			if err == nil || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("planlog %s: %v", args[0], err)
			}
		}
	}
}

// A deleted session's log stays its owner's: no other AgentSession can fork it until an
// operator releases it naming the recorded owner; import --owner records the owner it names.
func TestReleaseAndImportOwner(t *testing.T) {
	onBothStores(t, func(t *testing.T, store string, want []byte) {
		if out, err := run(t, string(want), "import", "--store", store, "--owner", "team-a/s1"); err != nil {
			t.Fatalf("import --owner: %q, %v", out, err)
		}
		out, err := run(t, "", "tail", "--store", store, "--session", "spec-examples")
		if err != nil || !strings.Contains(out, `"owner": "team-a/s1"`) {
			t.Fatalf("tail does not show the owner: %q, %v", out, err)
		}
		// Importing it again under a session id team-a/s1 owns is refused for anyone else.
		if _, err := run(t, string(want), "import", "--store", store, "--owner", "team-b/x"); err == nil {
			t.Fatal("a second import of an owned log was accepted")
		}
		_, err = run(t, "", "release", "--store", store, "--session", "spec-examples", "--owner", "team-b/s1")
		var refused *sessionlog.OwnershipError
		if !errors.As(err, &refused) || refused.Refusal != sessionlog.RefusedNotTheOwner {
			t.Fatalf("release naming another owner: %v", err)
		}
		s, err := sessionlog.Open(context.Background(), store)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		thief := sessionlog.Owner{Namespace: "team-b", Name: "copy", UID: "u"}
		if _, err := s.Fork(context.Background(), "spec-examples", "stolen", -1, thief); !sessionlog.IsOwnershipRefusal(err) {
			t.Fatalf("fork from another namespace before the release: %v", err)
		}
		out, err = run(t, "", "release", "--store", store, "--session", "spec-examples", "--owner", "team-a/s1")
		if err != nil || !strings.Contains(out, "released session \"spec-examples\" from AgentSession team-a/s1") {
			t.Fatalf("release: %q, %v", out, err)
		}
		if got, err := s.ClaimOwner(context.Background(), "spec-examples", thief); err != nil || got != thief {
			t.Fatalf("claim after the release: %+v, %v", got, err)
		}
		for _, args := range [][]string{{"release", "--store", store, "--session", "x"}, {"release", "--store", store, "--owner", "a/b"}, {"import", "--store", store, "--owner", "nobody"}} {
			if _, err := run(t, string(want), args...); err == nil {
				t.Errorf("planlog %s: accepted", strings.Join(args, " "))
			}
		}
	})
}
