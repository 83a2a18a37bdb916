package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/test/framework"
)

// nextRunWithin bounds how long a run started after any ending takes to get past its checks
// (the lock, an earlier run's processes) to starting its control plane, or to refuse.
const nextRunWithin = 10 * time.Second

// binaryRun is the localenv binary started as make run starts it, its stdout and stderr a
// pipe whose reading end the test holds (and may close: a tee that died).
type binaryRun struct {
	cmd    *exec.Cmd
	out    *framework.SyncBuffer
	reader *os.File
	done   chan error
	// copied is closed once the run's output pipe has ended and all of it is in out.
	copied  chan struct{}
	started time.Time
	// tmp is its TMPDIR, which holds every temporary folder of the run.
	tmp string
}

func startBinary(t *testing.T, dir string) *binaryRun {
	t.Helper()
	o := testOptions(t, dir)
	r := &binaryRun{out: &framework.SyncBuffer{}, done: make(chan error, 1), copied: make(chan struct{}), tmp: t.TempDir()}
	r.cmd = exec.Command(filepath.Join(binDir, "localenv"), "--dir", dir, "--assets", o.assets, "--bin", binDir, "--no-agent",
		"--crd-dir", o.crdDir, "--webhook-dir", o.whookDir, "--ready-timeout", "2m", "--stop-timeout", "15s")
	r.cmd.Env = append(os.Environ(), "KUBECONFIG=", "PLANMODE_LOG_STORE=", "TMPDIR="+r.tmp)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.reader = pr
	r.cmd.Stdout, r.cmd.Stderr = pw, pw
	r.started = time.Now()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	go func() { _, _ = io.Copy(r.out, pr); close(r.copied) }()
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			if err := <-r.done; err != nil {
				t.Logf("localenv killed at cleanup: %v", err)
			}
		}
		_ = pr.Close()
	})
	return r
}

// waitFor waits for text in the output, failing if the run ends first.
func (r *binaryRun) waitFor(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(r.out.String(), text) {
		select {
		case err := <-r.done:
			r.done <- err
			t.Fatalf("localenv exited (%v) before printing %q:\n%s", err, text, r.out.String())
		case <-deadline:
			t.Fatalf("localenv did not print %q within %s:\n%s", text, timeout, r.out.String())
		case <-tick.C:
		}
	}
}

// parts are the processes the run started: its children (etcd, kube-apiserver, the manager,
// the guard) and the shims' command names.
func (r *binaryRun) parts(t *testing.T) map[string][]int {
	t.Helper()
	parts := childrenOf(t, r.cmd.Process.Pid)
	for _, name := range []string{"etcd", "kube-apiserver", "manager", "localenv"} {
		if len(parts[name]) == 0 {
			t.Fatalf("localenv runs no %s child: %v", name, parts)
		}
	}
	return parts
}

// outputDrain bounds how long wait reads a run's output after the run exited.
const outputDrain = 5 * time.Second

// wait returns the run's exit error, failing if it has not exited within timeout.
func (r *binaryRun) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		// What it printed before it exited may still be in the pipe: the callers read the
		// output next. The pipe ends once every process holding it has; a child that outlives
		// the run (a test's leftover) is not waited for past outputDrain.
		select {
		case <-r.copied:
		case <-time.After(outputDrain):
		}
		return err
	case <-time.After(timeout):
		t.Fatalf("localenv still running %s after it was told to stop:\n%s", timeout, r.out.String())
		return nil
	}
}

// expectNothingLeft checks, right after a run ended, that none of its processes survive and
// its temporary folders are gone, each within nextRunWithin.
func expectNothingLeft(t *testing.T, r *binaryRun, parts map[string][]int) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() []string {
		var alive []string
		for name, pids := range parts {
			for _, pid := range pids {
				if framework.ProcessRunning(pid) {
					alive = append(alive, name+" "+strconv.Itoa(pid))
				}
			}
		}
		return alive
	}).WithTimeout(nextRunWithin).WithPolling(50*time.Millisecond).Should(BeEmpty(), "processes of the run still running")
	g.Eventually(func() []string {
		entries, _ := os.ReadDir(r.tmp)
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}).WithTimeout(nextRunWithin).WithPolling(50*time.Millisecond).Should(BeEmpty(), "temporary folders left in the run's TMPDIR")
	g.Expect(r.out.String()).NotTo(ContainSubstring("goroutine "), "no stack trace")
}

// nextRun starts the binary on dir after an ending: it must get past its checks to starting its
// control plane within nextRunWithin, then come up; it returns the run and its parts.
func nextRun(t *testing.T, dir string) (*binaryRun, map[string][]int) {
	t.Helper()
	run := startBinary(t, dir)
	run.waitFor(t, "Starting a local control plane", nextRunWithin)
	run.waitFor(t, "planmode-operator is running", 3*time.Minute)
	return run, run.parts(t)
}

// The binary, under every way make run ends: Ctrl-C while the reader of its output (make run
// | tee) is gone, a hangup (the terminal closed), SIGKILL, and a plain Ctrl-C. After each, no
// process of the run survives, no temporary folder is left, and the next run on the same
// state gets to starting its control plane within 10 s.
func TestEveryEndingStopsEverything(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	run := startBinary(t, dir)
	run.waitFor(t, "planmode-operator is running", 3*time.Minute)

	t.Log("Ctrl-C with the pipe's reader gone: the shutdown's lines fail with EPIPE, and it goes on")
	parts := run.parts(t)
	g.Expect(run.reader.Close()).To(Succeed())
	g.Expect(run.cmd.Process.Signal(os.Interrupt)).To(Succeed())
	g.Expect(run.wait(t, time.Minute)).To(Succeed(), "a clean exit, not SIGPIPE")
	expectNothingLeft(t, run, parts)

	t.Log("a hangup")
	run, parts = nextRun(t, dir)
	g.Expect(run.cmd.Process.Signal(syscall.SIGHUP)).To(Succeed())
	g.Expect(run.wait(t, time.Minute)).To(Succeed())
	g.Expect(run.out.String()).To(ContainSubstring("Hangup (the terminal closed): stopping"))
	expectNothingLeft(t, run, parts)

	t.Log("SIGKILL: nothing of localenv runs to stop anything; the parent-death signal and the guard do")
	run, parts = nextRun(t, dir)
	g.Expect(run.cmd.Process.Kill()).To(Succeed())
	var ee *exec.ExitError
	g.Expect(errors.As(run.wait(t, time.Minute), &ee)).To(BeTrue())
	expectNothingLeft(t, run, parts)

	t.Log("Ctrl-C")
	run, parts = nextRun(t, dir)
	g.Expect(run.cmd.Process.Signal(os.Interrupt)).To(Succeed())
	g.Expect(run.wait(t, time.Minute)).To(Succeed(), "Ctrl-C is a clean exit:\n%s", run.out.String())
	g.Expect(run.out.String()).To(ContainSubstring("Ctrl-C: stopping the demo agent, the manager and the control plane"))
	expectNothingLeft(t, run, parts)
}

// Ctrl-C while the control plane is still starting answers at once: the run stops within
// seconds, leaving nothing behind.
func TestInterruptDuringStart(t *testing.T) {
	g := NewWithT(t)
	run := startBinary(t, t.TempDir())
	run.waitFor(t, "Starting a local control plane", nextRunWithin)
	parts := childrenOf(t, run.cmd.Process.Pid)
	g.Expect(run.cmd.Process.Signal(os.Interrupt)).To(Succeed())
	g.Expect(run.wait(t, 20*time.Second)).To(Succeed(), "%s", run.out.String())
	expectNothingLeft(t, run, parts)
	g.Expect(run.out.String()).NotTo(ContainSubstring("planmode-operator is running"))
}

// What an earlier run left on the state folder is named and stopped before anything starts
// (an etcd on its data, and the kube-apiserver on that etcd); a process of anyone else that
// holds the control plane's data is named, and the run refuses, within seconds.
func TestLeftoversAreNamed(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	o := testOptions(t, dir)
	etcdDir := filepath.Join(dir, "etcd")
	g.Expect(os.MkdirAll(etcdDir, 0o700)).To(Succeed())

	t.Log("a foreign holder: refused, naming it")
	held, err := os.Create(filepath.Join(etcdDir, "held"))
	g.Expect(err).NotTo(HaveOccurred())
	holder := exec.Command("sleep", "300")
	holder.ExtraFiles = []*os.File{held}
	g.Expect(holder.Start()).To(Succeed())
	_ = held.Close()
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	run := startBinary(t, dir)
	var ee *exec.ExitError
	g.Expect(errors.As(run.wait(t, nextRunWithin), &ee)).To(BeTrue(), "refused: %s", run.out.String())
	g.Expect(run.out.String()).To(ContainSubstring("pid " + strconv.Itoa(holder.Process.Pid) + " (sleep 300) has " + filepath.Join(etcdDir, "held") + " open"))
	g.Expect(run.out.String()).To(ContainSubstring("kill " + strconv.Itoa(holder.Process.Pid)))
	g.Expect(framework.ProcessRunning(holder.Process.Pid)).To(BeTrue(), "a process not of make run is never stopped")
	_ = holder.Process.Kill()
	_ = holder.Wait()

	t.Log("an earlier run's etcd and kube-apiserver: stopped, each named")
	port := strconv.Itoa(freePort(t))
	url := "http://127.0.0.1:" + port
	etcd := exec.Command(filepath.Join(o.assets, "etcd"), "--data-dir="+etcdDir, "--listen-client-urls="+url, "--advertise-client-urls="+url,
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(freePort(t)))
	etcd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A stand-in kube-apiserver: a script of that name with the flag that ties it to etcd.
	fake := filepath.Join(t.TempDir(), "kube-apiserver")
	g.Expect(os.WriteFile(fake, []byte("#!/bin/sh\nsleep 300\n"), 0o700)).To(Succeed())
	apiserver := exec.Command(fake, "--etcd-servers="+url)
	apiserver.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	waited := map[int]chan struct{}{}
	for _, c := range []*exec.Cmd{etcd, apiserver} {
		g.Expect(c.Start()).To(Succeed())
		ch := make(chan struct{})
		waited[c.Process.Pid] = ch
		go func(c *exec.Cmd) { _ = c.Wait(); close(ch) }(c)
		t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); <-ch })
	}
	g.Eventually(func() bool { _, err := os.Stat(filepath.Join(etcdDir, "member")); return err == nil }).WithTimeout(30 * time.Second).Should(BeTrue())
	run = startBinary(t, dir)
	run.waitFor(t, "Starting a local control plane", nextRunWithin)
	out := run.out.String()
	g.Expect(out).To(ContainSubstring("Stopping etcd (the local control plane's data), pid " + strconv.Itoa(etcd.Process.Pid) + ", which an earlier make run on " + dir + " left running"))
	g.Expect(out).To(ContainSubstring("Stopping kube-apiserver (on that etcd), pid " + strconv.Itoa(apiserver.Process.Pid)))
	for pid, ch := range waited {
		select {
		case <-ch:
		case <-time.After(time.Second):
			t.Fatalf("pid %d still running after the run started its control plane", pid)
		}
	}
	run.waitFor(t, "planmode-operator is running", 3*time.Minute)
	g.Expect(run.cmd.Process.Signal(os.Interrupt)).To(Succeed())
	g.Expect(run.wait(t, time.Minute)).To(Succeed())
}
