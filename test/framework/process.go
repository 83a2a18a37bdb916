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
	pid, err := findProcess("kube-apiserver", func(args []string) bool { return slices.Contains(args, want) })
	if err != nil {
		return 0, fmt.Errorf("%w with %s", err, want)
	}
	return pid, nil
}

// EtcdPID finds the etcd behind the envtest kube-apiserver serving cfg: the process that
// listens for clients at the address the API server's --etcd-servers names.
func EtcdPID(cfg *rest.Config) (int, error) {
	api, err := APIServerPID(cfg)
	if err != nil {
		return 0, err
	}
	var servers string
	for _, a := range processArgs(api) {
		if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
			servers = v
		}
	}
	if servers == "" {
		return 0, fmt.Errorf("kube-apiserver (pid %d) names no --etcd-servers", api)
	}
	want := strings.Split(servers, ",")
	pid, err := findProcess("etcd", func(args []string) bool {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--listen-client-urls="); ok {
				for _, u := range strings.Split(v, ",") {
					if slices.Contains(want, u) {
						return true
					}
				}
			}
		}
		return false
	})
	if err != nil {
		return 0, fmt.Errorf("%w listening at %s", err, servers)
	}
	return pid, nil
}

// findProcess is the first process whose executable's name is name and whose arguments match.
func findProcess(name string, match func(args []string) bool) (int, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		args := processArgs(pid)
		if len(args) > 0 && filepath.Base(args[0]) == name && match(args) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no %s process", name)
}

// processArgs is pid's command line, nil when it cannot be read.
func processArgs(pid int) []string {
	cmd, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(cmd) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(cmd), "\x00"), "\x00")
}
