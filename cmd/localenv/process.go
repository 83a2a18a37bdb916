package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a child the environment runs (the manager, the demo agent), in its own process
// group so a terminal's Ctrl-C reaches only localenv, which then stops the children in order.
type process struct {
	name string
	cmd  *exec.Cmd
	// exited is closed once the process has exited; err then holds what cmd.Wait returned.
	exited chan struct{}
	err    error
}

// startProcess runs path with args, its output in logPath. The log of the previous run is kept
// as logPath.previous, so a run's log holds that run only. KUBECONFIG is set to kubeconfig, so
// a child never falls back to the caller's KUBECONFIG.
func startProcess(path string, args []string, logPath, kubeconfig string) (*process, error) {
	return startProcessEnv(path, args, logPath, kubeconfig, "", nil)
}

// startProcessEnv is startProcess in working directory dir (the current one when empty) with
// env added to the environment.
func startProcessEnv(path string, args []string, logPath, kubeconfig, dir string, env []string) (*process, error) {
	if _, err := os.Stat(logPath); err == nil {
		_ = os.Rename(logPath, logPath+".previous")
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", logPath, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), env...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &process{name: filepath.Base(path), cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// describeExit says how the process ended, once exited is closed.
func (p *process) describeExit() string {
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return "it exited with status 0"
	case errors.As(p.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "it was killed by signal " + ws.Signal().String()
		}
		return "it exited with status " + strconv.Itoa(ee.ExitCode())
	default:
		return p.err.Error()
	}
}

// stop asks the process group to shut down and kills it if it has not within timeout. It
// returns at once for a process that already exited.
func (p *process) stop(timeout time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(timeout):
		fmt.Fprintf(os.Stderr, "localenv: the %s did not stop within %s; killing it\n", p.name, timeout)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}

var probeClient = &http.Client{Timeout: time.Second}

func probe(url string) bool {
	resp, err := probeClient.Get(url)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy polls url until it answers 200, the process exits, ctx ends or timeout passes.
func waitHealthy(ctx context.Context, url string, timeout time.Duration, p *process) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if probe(url) {
			return nil
		}
		select {
		case <-p.exited:
			return &errPartExited{part: p.name, detail: p.describeExit()}
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s not ready after %s", url, timeout)
		case <-tick.C:
		}
	}
}

// pickPort returns 127.0.0.1:port, or a free port when port is 0. A given port that is taken is
// an error naming the flag, rather than a manager that dies on bind while another process
// answers its probes.
func pickPort(flagName string, port int) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", fmt.Errorf("%s %d: port is taken (%v); pick another one, or 0 for a free one", flagName, port, err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// lockDir takes an exclusive lock on dir, so a second localenv on the same state fails at once
// with a message instead of sharing etcd's data and the log.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, "localenv.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		who := strings.TrimSpace(string(holder))
		if who == "" {
			who = "unknown"
		}
		return nil, fmt.Errorf("another make run (pid %s) is using %s: stop it first, or give this one its own folder with RUN_ARGS=--dir=OTHER", who, dir)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { _ = f.Close() }, nil
}
