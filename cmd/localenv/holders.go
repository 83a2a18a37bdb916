package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The state folder has one owner at a time. The lock names the localenv that has it; what an
// earlier run left running, or any other process holding the control plane's data, is found
// in /proc before anything starts, so a second etcd never waits on the first one's data.

// leftoverGrace is how long a process an earlier run left gets to stop before SIGKILL.
const leftoverGrace = 5 * time.Second

// lockDir takes an exclusive lock on dir, so a second localenv on the same state fails at once
// with a message naming the first, instead of sharing etcd's data and the log.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, "localenv.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		who := "pid " + strings.TrimSpace(string(holder))
		if pid, err := strconv.Atoi(strings.TrimSpace(string(holder))); err == nil {
			if p, ok := readProc(pid); ok {
				who = fmt.Sprintf("pid %d: %s", pid, p.command())
			}
		}
		return nil, fmt.Errorf("another make run (%s) is using %s: stop it first (Ctrl-C in its terminal, or kill %s), "+
			"or give this one its own folder with RUN_ARGS=--dir=OTHER", who, dir, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { _ = f.Close() }, nil
}

// leftover is a process found holding the state folder: one an earlier run left (what names
// it), or a foreign one (held names the file of the control plane's data it has open).
type leftover struct {
	procInfo
	what, held string
}

// findLeftovers lists the processes, other than this one, that belong to an earlier run on
// dir (an etcd on its data, a manager or agent on its log, a harness working in it, and the
// kube-apiserver of such an etcd), and those that hold a file of the control plane's data.
func findLeftovers(dir string) (ours, foreign []leftover) {
	etcdDir, store, dshWork := filepath.Join(dir, "etcd"), filepath.Join(dir, "sessions.db"), filepath.Join(dir, "dsh-work")
	procs := processes()
	etcdURLs := map[string]bool{}
	for _, p := range procs {
		if p.pid == os.Getpid() || !p.alive() {
			continue
		}
		cwd, files := openFiles(p.pid)
		switch {
		case p.comm == etcdBinary && mentions(p.args, etcdDir):
			ours = append(ours, leftover{procInfo: p, what: "etcd (the local control plane's data)"})
			if u := flagValue(p.args, "--listen-client-urls"); u != "" {
				etcdURLs[u] = true
			}
		case (argBase(p.args, 0) == managerBinary || argBase(p.args, 0) == refagentBinary) && mentions(p.args, store):
			ours = append(ours, leftover{procInfo: p, what: "the " + argBase(p.args, 0)})
		case within(cwd, dshWork) && (argBase(p.args, 0) == "dsh" || argBase(p.args, 1) == "dsh"):
			ours = append(ours, leftover{procInfo: p, what: "the dsh demo agent"})
		default:
			for _, f := range files {
				if within(f, etcdDir) {
					foreign = append(foreign, leftover{procInfo: p, held: f})
					break
				}
			}
		}
	}
	for _, p := range procs {
		if p.comm == apiServerBinary && p.alive() && etcdURLs[flagValue(p.args, "--etcd-servers")] {
			ours = append(ours, leftover{procInfo: p, what: "kube-apiserver (on that etcd)"})
		}
	}
	return ours, foreign
}

// clearLeftovers stops what an earlier run on dir left running, saying what and which pid on
// out, and refuses to start while another process holds the control plane's data. Both take
// seconds at most.
func clearLeftovers(dir string, out io.Writer) error {
	ours, foreign := findLeftovers(dir)
	if len(foreign) > 0 {
		f := foreign[0]
		return fmt.Errorf("pid %d (%s) has %s open, and it is not part of an earlier make run: a control plane started now would wait on it. "+
			"Stop it (kill %d), or give this run its own folder with RUN_ARGS=--dir=OTHER", f.pid, f.command(), f.held, f.pid)
	}
	for _, l := range ours {
		fmt.Fprintf(out, "Stopping %s, pid %d, which an earlier make run on %s left running...\n", l.what, l.pid, dir)
		target := l.pid
		if l.pgid == l.pid {
			target = -l.pid // its group: a harness's own children too
		}
		_ = syscall.Kill(target, syscall.SIGTERM)
	}
	deadline := time.Now().Add(leftoverGrace)
	for _, l := range ours {
		for sameProcess(l.procInfo) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // not our child: /proc is all there is to watch
		}
		if sameProcess(l.procInfo) {
			fmt.Fprintf(out, "%s (pid %d) did not stop within %s; killing it\n", l.what, l.pid, leftoverGrace)
			_ = syscall.Kill(l.pid, syscall.SIGKILL)
		}
	}
	return nil
}

// sameProcess reports whether p is still running (its pid, with the same start time).
func sameProcess(p procInfo) bool {
	now, ok := readProc(p.pid)
	return ok && now.start == p.start && now.alive()
}

// mentions reports whether an argument names path (or a file under it).
func mentions(args []string, path string) bool {
	for _, a := range args {
		for i := strings.Index(a, path); i >= 0; {
			end := i + len(path)
			if end == len(a) || a[end] == '/' || a[end] == '?' {
				return true
			}
			next := strings.Index(a[end:], path)
			if next < 0 {
				break
			}
			i = end + next
		}
	}
	return false
}

// argBase is the base name of args[i] ("" when there is none).
func argBase(args []string, i int) string {
	if i >= len(args) || args[i] == "" {
		return ""
	}
	return filepath.Base(args[i])
}

// flagValue is the value of --name=value or --name value in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
