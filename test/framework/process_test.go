package framework

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestProcessRunning(t *testing.T) {
	if !ProcessRunning(os.Getpid()) {
		t.Error("this process is not reported running")
	}
	// A child that has exited but is not yet reaped is a zombie: not running.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for ProcessRunning(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d (exited, unreaped) still reported running", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
		t.Fatalf("the child was reaped before the check: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if ProcessRunning(pid) {
		t.Errorf("pid %d reported running after it was reaped", pid)
	}
}

// TestMain lets a test start this binary as a stand-in process that waits for its stdin to
// close: its command line is whatever the test gives it.
func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) != "" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const standInEnv = "FRAMEWORK_TEST_STAND_IN"

// standIn starts this binary with the command line args (args[0] the name it runs as) and
// stops it when the test ends.
func standIn(t *testing.T, args ...string) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: exe, Args: args, Env: append(os.Environ(), standInEnv+"=1")}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

// The etcd found is the one listening where the API server's --etcd-servers points, not
// another etcd on the machine; an API server no process serves is an error.
func TestEtcdPIDFollowsTheAPIServersEtcdServers(t *testing.T) {
	dir := t.TempDir()
	standIn(t, filepath.Join(dir, "etcd"), "--listen-client-urls=http://127.0.0.1:3")
	api := standIn(t, filepath.Join(dir, "kube-apiserver"), "--secure-port=1", "--etcd-servers=http://127.0.0.1:2")
	etcd := standIn(t, filepath.Join(dir, "etcd"), "--name=one", "--listen-client-urls=http://127.0.0.1:2")
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	if got, err := APIServerPID(cfg); err != nil || got != api {
		t.Errorf("APIServerPID = %d, %v; want %d", got, err, api)
	}
	if got, err := EtcdPID(cfg); err != nil || got != etcd {
		t.Errorf("EtcdPID = %d, %v; want %d", got, err, etcd)
	}
	if got, err := EtcdPID(&rest.Config{Host: "https://127.0.0.1:4"}); err == nil {
		t.Errorf("EtcdPID of an API server no process serves = %d, want an error", got)
	}
}
