package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procInfo is what /proc tells about one process: enough to name it, to know whose child it is,
// and to recognise it again (a pid is reused; a pid with its start time is not).
type procInfo struct {
	pid, ppid, pgid int
	// comm is the kernel's short command name (the executable's base name, 15 bytes at most).
	comm  string
	state byte
	// start is the start time in clock ticks since boot.
	start int64
	args  []string
}

// readProc reads /proc/PID; false when the process is gone.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procInfo{}, false
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
	// stime cutime cstime priority nice num_threads itrealvalue starttime ...; comm may hold
	// anything, so the fields are counted from its closing parenthesis.
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return procInfo{}, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return procInfo{}, false
	}
	p := procInfo{pid: pid, comm: s[open+1 : end], state: f[0][0]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgid, _ = strconv.Atoi(f[2])
	p.start, _ = strconv.ParseInt(f[19], 10, 64)
	if raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline")); err == nil {
		p.args = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	}
	return p, true
}

// alive: present and not a zombie (exited, waiting to be reaped).
func (p procInfo) alive() bool { return p.state != 'Z' && p.state != 'X' }

// command is the process's command line for a message, shortened.
func (p procInfo) command() string {
	c := strings.Join(p.args, " ")
	if c == "" {
		c = p.comm
	}
	if len(c) > 120 {
		c = c[:117] + "..."
	}
	return c
}

// processes lists every process /proc shows, this one included.
func processes() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out
}

// groupAlive reports whether process group pgid has a member that is not a zombie.
func groupAlive(pgid int) bool {
	for _, p := range processes() {
		if p.pgid == pgid && p.alive() {
			return true
		}
	}
	return false
}

// openFiles returns process pid's working directory and the files it has open; empty when
// /proc does not let this user read them.
func openFiles(pid int) (cwd string, files []string) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	cwd, _ = os.Readlink(filepath.Join(dir, "cwd"))
	fds, err := os.ReadDir(filepath.Join(dir, "fd"))
	if err != nil {
		return cwd, nil
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name())); err == nil && strings.HasPrefix(target, "/") {
			files = append(files, target)
		}
	}
	return cwd, files
}

// within reports whether path is dir or inside it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
