package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The agent names its store in its error when the store cannot be opened, never with the
// store's password, whatever form the connection string has.
func TestStoreErrorsNeverShowThePassword(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "refagent")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// A kubeconfig is read but never dialled: the store is opened first.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{
		"postgres://planmode:s3cret@127.0.0.1:1/log?sslmode=disable&connect_timeout=1",
		"postgres://planmode@127.0.0.1:1/log?sslmode=disable&password=s3cret&connect_timeout=1",
		"host=127.0.0.1 port=1 user=planmode password=s3cret dbname=log",
		"sqlite:///nonexistent/log.db?password=s3cret",
	} {
		cmd := exec.Command(bin, "--namespace", "ns", "--name", "demo", "--store", url)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.CombinedOutput()
		if err == nil || strings.Contains(string(out), "s3cret") || !strings.Contains(string(out), "session log") {
			t.Errorf("refagent --store (%v):\n%s", err, out)
		}
	}
}
