package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// `localenv --version` (make run's binary) is one line, exit 0, and starts nothing: no .planmode
// folder for a control plane's data is made.
func TestVersion(t *testing.T) {
	cwd := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "localenv"), "--version")
	cmd.Dir = cwd
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("localenv --version: %v\nstdout: %s\nstderr: %s", err, out.String(), errOut.String())
	}
	if !regexp.MustCompile(`^localenv \S+ \(commit \S+, go\S+\)\n$`).MatchString(out.String()) || errOut.Len() != 0 {
		t.Fatalf("localenv --version printed stdout %q, stderr %q; want one line: localenv VERSION (commit C, goX)", out.String(), errOut.String())
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Errorf("localenv --version created %d entries in its working directory (a .planmode folder?)", len(entries))
	}
}
