package framework

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// ProcessRunning reports whether pid is a live process: present in /proc and not a zombie
// (exited, awaiting its parent's reaping).
func ProcessRunning(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	// The state follows the command name, which is in parentheses and may hold anything.
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// ProcessCPU is the CPU time (user + system) process pid has used so far; 0 when it cannot be
// read.
func ProcessCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are fields 14 and 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

// APIServerPID finds the envtest kube-apiserver serving cfg: the process whose command line
// names that secure port.
func APIServerPID(cfg *rest.Config) (int, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return 0, fmt.Errorf("API server address %q: %w", cfg.Host, err)
	}
	want := "--secure-port=" + u.Port()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if strings.HasSuffix(args[0], "kube-apiserver") && slices.Contains(args, want) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with %s", want)
}
