package framework

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
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
