package framework

import (
	"fmt"
	"os"
	"strings"
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
