package harness_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// The commands a user runs on a harness log: planlog (import, export, tail) and plancheck,
// built once per test binary from ./cmd/planlog and ./cmd/plancheck into toolsDir.
var (
	toolsDir   string // made by TestMain, removed after the suite
	buildOnce  sync.Once
	buildError error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "harness-oracle-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	toolsDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// tool returns the path of the built command name (planlog or plancheck), building both on
// first use.
func tool(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := framework.ModuleRoot()
		if err != nil {
			buildError = err
			return
		}
		build := exec.Command("go", "build", "-o", toolsDir+"/", "./cmd/planlog", "./cmd/plancheck")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			buildError = fmt.Errorf("go build ./cmd/planlog ./cmd/plancheck: %v\n%s", err, out)
		}
	})
	if buildError != nil {
		t.Fatal(buildError)
	}
	return filepath.Join(toolsDir, name)
}

// cliStore is a SQLite log store the commands reach through $PLANMODE_LOG_STORE, as a user
// would set it: planlog import then takes no flags at all.
type cliStore struct {
	url string
}

func newCLIStore(t *testing.T) cliStore {
	return cliStore{url: "sqlite://" + filepath.Join(t.TempDir(), "cli.db")}
}

// run runs a built command with stdin and returns its stdout and exit code; anything other
// than an exit status fails the test.
func (s cliStore) run(t *testing.T, stdin []byte, name string, args ...string) (stdout []byte, code int) {
	t.Helper()
	cmd := exec.Command(tool(t, name), args...)
	env := []string{storeenv.Name + "=" + s.url}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != storeenv.Name {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	if errOut.Len() > 0 {
		t.Logf("%s %s: stderr: %s", name, strings.Join(args, " "), strings.TrimSpace(errOut.String()))
	}
	return out.Bytes(), code
}

// checkCommands puts the harness's log through the commands: planlog import with no flags
// (the log on stdin, compressed or not), planlog export (byte for byte what the library
// exported, which for a plain log is the log itself), planlog tail (the library's fold), and
// plancheck, whose verdict and exit status are the pinned ones.
func checkCommands(t *testing.T, l *liveLog, libExport []byte, libTail harness.Tail, pinned []invariant.Kind) {
	t.Helper()
	s := newCLIStore(t)
	hdr := l.header(t)
	done := l.last("done")

	out, code := s.run(t, l.Raw, "planlog", "import")
	if code != 0 {
		t.Fatalf("planlog import < %s: exit %d: %s", l.File, code, out)
	}
	if got, want := string(out), fmt.Sprintf("imported session %q: %d events\n", hdr.ID, done.Seq); got != want {
		t.Errorf("planlog import < %s: said %q, want %q (the harness's session and its event count)", l.File, got, want)
	}

	out, code = s.run(t, nil, "planlog", "export", "--session", hdr.ID, "--cwd", hdr.Cwd)
	if code != 0 {
		t.Fatalf("planlog export: exit %d", code)
	}
	if d := firstDiff(out, libExport); d != "" {
		t.Errorf("planlog export differs from the library's export of the same log: %s", d)
	}

	out, code = s.run(t, nil, "planlog", "tail", "--session", hdr.ID)
	if code != 0 {
		t.Fatalf("planlog tail: exit %d", code)
	}
	// planlog tail's JSON (cmd/planlog's tailJSON).
	var tail struct {
		Session          string `json:"session"`
		NextSeq          int64  `json:"nextSeq"`
		Active           bool   `json:"active"`
		LastPlanModeSeq  int64  `json:"lastPlanModeSeq"`
		LastShown        *bool  `json:"told"`
		TurnOpen         bool   `json:"turnOpen"`
		Turn             int64  `json:"turn"`
		Step             int64  `json:"step"`
		StepOpen         bool   `json:"stepOpen"`
		LastStepStartSeq int64  `json:"lastStepStartSeq"`
	}
	if err := json.Unmarshal(out, &tail); err != nil {
		t.Fatalf("planlog tail: %v\n%s", err, out)
	}
	got := tailFields(harness.Tail{NextSeq: tail.NextSeq, Active: tail.Active, LastPlanModeSeq: tail.LastPlanModeSeq, LastShown: tail.LastShown,
		TurnOpen: tail.TurnOpen, Turn: tail.Turn, Step: tail.Step, StepOpen: tail.StepOpen, LastStepStartSeq: tail.LastStepStartSeq})
	if want := tailFields(libTail); tail.Session != hdr.ID || got != want {
		t.Errorf("planlog tail: session %s %s; the library's fold: session %s %s", tail.Session, got, hdr.ID, want)
	}

	// plancheck: 0 clean, 1 violations; the summary line counts the events and violations.
	out, code = s.run(t, nil, "plancheck", "--session", hdr.ID)
	wantCode := 0
	if len(pinned) > 0 {
		wantCode = 1
	}
	if code != wantCode {
		t.Errorf("plancheck: exit %d, want %d (pinned verdict %v)\n%s", code, wantCode, pinned, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if want := fmt.Sprintf("session %q: %d events, 0 acks checked, %d violations", hdr.ID, done.Seq, len(pinned)); lines[len(lines)-1] != want {
		t.Errorf("plancheck said %q, want %q", lines[len(lines)-1], want)
	}
	out, code = s.run(t, nil, "plancheck", "--session", hdr.ID, "--json")
	var vs []invariant.Violation
	if err := json.Unmarshal(out, &vs); err != nil {
		t.Fatalf("plancheck --json: exit %d: %v\n%s", code, err, out)
	}
	kinds := make([]invariant.Kind, 0, len(vs))
	for _, v := range vs {
		kinds = append(kinds, v.Kind)
	}
	if !slices.Equal(kinds, pinned) || code != wantCode {
		t.Errorf("plancheck --json: verdict %v, exit %d; pinned %v, exit %d", kinds, code, pinned, wantCode)
	}
}

// tailFields renders the tail state planlog tail prints, for comparison.
func tailFields(t harness.Tail) string {
	return fmt.Sprintf("nextSeq %d active %v lastPlanModeSeq %d told %v turn %d step %d turnOpen %v stepOpen %v lastStepStartSeq %d",
		t.NextSeq, t.Active, t.LastPlanModeSeq, boolText(t.LastShown), t.Turn, t.Step, t.TurnOpen, t.StepOpen, t.LastStepStartSeq)
}
