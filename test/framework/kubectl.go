package framework

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"time"
)

// TB is the part of testing.TB (and of ginkgo's GinkgoT()) that the helpers here fail and log
// through, so a Ginkgo suite and a plain test use them alike.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// KubectlTimeout bounds one RunKubectl: a command that hangs fails its spec instead of the suite.
const KubectlTimeout = 60 * time.Second

// KubectlCmd says how a suite runs kubectl: the binary and the whole environment it runs with
// (KUBECONFIG, the PATH its plugins are found on, a HOME of its own).
type KubectlCmd struct {
	Path string
	Env  []string
}

// CmdResult is one command's run: its output and exit code, with the assertions the suites make
// on a kubectl or kubectl plan reply.
type CmdResult struct {
	Args     []string
	Out, Err string
	Code     int
	t        TB
}

// Run runs kubectl ARGS... with stdin from in (nil: none) and logs the command line, its output
// and its exit code, so a failing spec's log shows every reply it read. Only a command that
// could not run fails t; a non-zero exit is the result's to judge.
func (k KubectlCmd) Run(ctx context.Context, t TB, in io.Reader, args ...string) CmdResult {
	t.Helper()
	c, stop := context.WithTimeout(ctx, KubectlTimeout)
	defer stop()
	cmd := exec.CommandContext(c, k.Path, args...)
	cmd.Env = k.Env
	cmd.Stdin = in
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run kubectl %v: %v", args, err)
	}
	t.Logf("$ kubectl %s\n%s%s(exit %d)", strings.Join(args, " "), out.String(), errb.String(), code)
	return CmdResult{Args: args, Out: out.String(), Err: errb.String(), Code: code, t: t}
}

// OK asserts a zero exit and returns stdout.
func (r CmdResult) OK() string {
	r.t.Helper()
	if r.Code != 0 {
		r.t.Fatalf("kubectl %s: exit %d, want 0\nstdout: %s\nstderr: %s", strings.Join(r.Args, " "), r.Code, r.Out, r.Err)
	}
	return r.Out
}

// Fails asserts the way kubectl plan refuses: exit 1 and stderr starting "error: ", holding
// every fragment.
func (r CmdResult) Fails(fragments ...string) {
	r.t.Helper()
	if r.Code != 1 {
		r.t.Fatalf("kubectl %s: exit %d, want 1\nstdout: %s\nstderr: %s", strings.Join(r.Args, " "), r.Code, r.Out, r.Err)
	}
	if !strings.HasPrefix(r.Err, "error: ") {
		r.t.Fatalf("kubectl %s: stderr does not start with %q:\n%s", strings.Join(r.Args, " "), "error: ", r.Err)
	}
	r.stderrHolds(fragments)
}

// Refused asserts that a plain kubectl command failed (any non-zero exit: kubectl's codes and
// wording are not kubectl plan's), with every fragment on stderr.
func (r CmdResult) Refused(fragments ...string) {
	r.t.Helper()
	if r.Code == 0 {
		r.t.Fatalf("kubectl %s: exit 0, want a failure\nstdout: %s", strings.Join(r.Args, " "), r.Out)
	}
	r.stderrHolds(fragments)
}

func (r CmdResult) stderrHolds(fragments []string) {
	r.t.Helper()
	for _, f := range fragments {
		if !strings.Contains(r.Err, f) {
			r.t.Fatalf("kubectl %s: stderr does not contain %q:\n%s", strings.Join(r.Args, " "), f, r.Err)
		}
	}
}
