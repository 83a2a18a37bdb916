package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// recordingTB records the first failure and stops the helper there, as t.Fatalf does.
type recordingTB struct {
	failure string
	logs    []string
}

type fatal struct{}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	panic(fatal{})
}

// failure runs f and returns what it failed with ("" when it passed).
func (r *recordingTB) failureOf(f func()) (failure string) {
	r.failure = ""
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(fatal); !ok {
				panic(p)
			}
		}
		failure = r.failure
	}()
	f()
	return ""
}

// sh stands in for kubectl: Run runs any binary, and the assertions judge only its result.
func sh(tb *recordingTB, script string) CmdResult {
	return KubectlCmd{Path: "/bin/sh"}.Run(context.Background(), tb, nil, "-c", script)
}

func TestCmdResult(t *testing.T) {
	tb := &recordingTB{}
	ok := sh(tb, "echo listed")
	if ok.Out != "listed\n" || ok.Code != 0 {
		t.Fatalf("result %+v", ok)
	}
	if len(tb.logs) != 1 || !strings.HasPrefix(tb.logs[0], "$ kubectl -c echo listed\nlisted\n(exit 0)") {
		t.Errorf("log %q", tb.logs)
	}
	refusal := sh(tb, "echo 'error: no session \"demo\"' >&2; exit 1")
	denied := sh(tb, "echo 'Error from server (Forbidden): denied' >&2; exit 1")
	crashed := sh(tb, "echo 'error: no session' >&2; exit 2")

	for _, c := range []struct {
		name  string
		check func()
		fails bool
	}{
		{"OK on exit 0", func() { ok.OK() }, false},
		{"OK on exit 1", func() { refusal.OK() }, true},
		{"Fails on exit 1, error: and the fragment", func() { refusal.Fails(`no session "demo"`) }, false},
		{"Fails on a missing fragment", func() { refusal.Fails("demo", "other") }, true},
		{"Fails without the error: prefix", func() { denied.Fails("denied") }, true},
		{"Fails on exit 2", func() { crashed.Fails("no session") }, true},
		{"Fails on exit 0", func() { ok.Fails() }, true},
		{"Refused on any failing exit with the fragments", func() { denied.Refused("Forbidden", "denied") }, false},
		{"Refused on exit 2", func() { crashed.Refused("no session") }, false},
		{"Refused on a missing fragment", func() { denied.Refused("not found") }, true},
		{"Refused on exit 0", func() { ok.Refused() }, true},
	} {
		if got := tb.failureOf(c.check); (got != "") != c.fails {
			t.Errorf("%s: failure %q, want failing %v", c.name, got, c.fails)
		}
	}

	if got := tb.failureOf(func() { KubectlCmd{Path: "/nonexistent/kubectl"}.Run(context.Background(), tb, nil, "version") }); !strings.Contains(got, "run kubectl [version]") {
		t.Errorf("a kubectl that cannot start: failure %q", got)
	}
}
