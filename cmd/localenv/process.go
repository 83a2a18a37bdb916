package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/harness-dev/planmode-operator/internal/freeport"
)

// process is a child the environment runs (the manager, the demo agent), in its own process
// group so a terminal's Ctrl-C reaches only localenv, which then stops the children in order;
// its life is tied to localenv's (lifetime.go).
type process struct {
	name string
	cmd  *exec.Cmd
	// exited is closed once the process has exited; err then holds what cmd.Wait returned.
	exited chan struct{}
	err    error
}

// startProcess runs path with args, its output in logPath (openRunLog). KUBECONFIG is set to kubeconfig, so
// a child never falls back to the caller's KUBECONFIG.
func startProcess(lt *lifetime, path string, args []string, logPath, kubeconfig string) (*process, error) {
	return startProcessEnv(lt, path, args, logPath, kubeconfig, "", nil)
}

// startProcessEnv is startProcess in working directory dir (the current one when empty) with
// env added to the environment.
func startProcessEnv(lt *lifetime, path string, args []string, logPath, kubeconfig, dir string, env []string) (*process, error) {
	logFile, err := openRunLog(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kubeconfig), env...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: deathSignal}
	onSpawnThread(func() { err = cmd.Start() })
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	lt.adopt(cmd.Process.Pid)
	p := &process{name: filepath.Base(path), cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lt.release(cmd.Process.Pid)
		_ = logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// openRunLog opens a fresh log at path, keeping the previous run's as path.previous, so a
// run's log holds that run only.
func openRunLog(path string) (*os.File, error) {
	if _, err := os.Stat(path); err == nil {
		_ = os.Rename(path, path+".previous")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
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
func (p *process) stop(timeout time.Duration, out io.Writer) {
	select {
	case <-p.exited:
		return
	default:
	}
	fmt.Fprintf(out, "Stopping the %s...\n", p.name)
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
	if port == 0 {
		free, err := freeport.Pick()
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(free)), err
	}
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
