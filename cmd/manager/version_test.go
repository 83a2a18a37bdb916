package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/test/framework"
)

// `manager --version` prints the build in one line and exits 0 before anything starts: no
// store is opened or created and no cluster is contacted, whatever the environment names.
func TestVersion(t *testing.T) {
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/manager: %v\n%s", err, out)
	}
	cwd := t.TempDir()
	cmd := exec.Command(bin, "--version")
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(cwd, "no-such-kubeconfig"), "PLANMODE_LOG_STORE=postgres://127.0.0.1:1/log")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("manager --version: %v\nstdout: %s\nstderr: %s", err, out.String(), errOut.String())
	}
	if !regexp.MustCompile(`^manager \S+ \(commit \S+, go\S+\)\n$`).MatchString(out.String()) || errOut.Len() != 0 {
		t.Fatalf("manager --version printed stdout %q, stderr %q; want one line: manager VERSION (commit C, goX)", out.String(), errOut.String())
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("manager --version took %s", d)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Errorf("manager --version created %d entries in its working directory (a .planmode log directory?)", len(entries))
	}
}
