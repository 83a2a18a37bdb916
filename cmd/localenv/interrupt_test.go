package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/test/framework"
)

// Ctrl-C on make run: the built binary, a real SIGINT, a clean exit (status 0) with every part
// it started gone and no stack trace.
func TestInterruptStopsEverything(t *testing.T) {
	g := NewWithT(t)
	o := testOptions(t, t.TempDir())
	cmd := exec.Command(filepath.Join(binDir, "localenv"), "--dir", o.dir, "--assets", o.assets, "--bin", binDir, "--no-agent",
		"--crd-dir", o.crdDir, "--webhook-dir", o.whookDir, "--ready-timeout", "2m", "--stop-timeout", "15s")
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "PLANMODE_LOG_STORE=")
	out := &framework.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	g.Expect(cmd.Start()).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			if err := <-done; err != nil {
				t.Logf("localenv killed: %v", err)
			}
		}
	})

	deadline := time.After(3 * time.Minute)
	for !strings.Contains(out.String(), "planmode-operator is running") {
		select {
		case err := <-done:
			exited = true
			t.Fatalf("localenv exited before it was up: %v\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("localenv not up after 3 minutes:\n%s", out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	parts := childrenOf(t, cmd.Process.Pid)
	t.Cleanup(func() { // a failed run leaves nothing behind for the next test
		if !t.Failed() {
			return
		}
		for _, pids := range parts {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for _, name := range []string{"etcd", "kube-apiserver", "manager"} {
		g.Expect(parts).To(HaveKey(name), "localenv runs %s as its child", name)
	}

	g.Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
	select {
	case err := <-done:
		exited = true
		g.Expect(err).NotTo(HaveOccurred(), "Ctrl-C is a clean exit:\n%s", out.String())
	case <-time.After(time.Minute):
		t.Fatalf("localenv still running a minute after Ctrl-C:\n%s", out.String())
	}
	for name, pids := range parts {
		for _, pid := range pids {
			g.Expect(framework.ProcessRunning(pid)).To(BeFalse(), "%s (pid %d) still running after Ctrl-C", name, pid)
		}
	}
	g.Expect(out.String()).NotTo(ContainSubstring("goroutine "), "no stack trace on Ctrl-C")
}
