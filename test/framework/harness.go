package framework

import (
	"fmt"
	"strings"
)

// HarnessProjectKey is the real harness's name for a project's directory under its session
// root: separators become one '-', other characters outside [A-Za-z0-9._-] become ~XXXX,
// wrapped in "--". The harness checks that a log sits under its header's cwd, so a test that
// places a log for the stock harness to resume files it here.
func HarnessProjectKey(cwd string) string {
	var b strings.Builder
	sep := false
	for _, r := range cwd {
		switch {
		case r == '/' || r == '\\' || r == ':':
			if !sep {
				b.WriteByte('-')
			}
			sep = true
			continue
		case r != '~' && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'):
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "~%04X", r)
		}
		sep = false
	}
	key := strings.TrimLeft(b.String(), "-")
	if key == "" {
		key = "root"
	}
	if len(key) > 251 {
		key = key[:251]
	}
	return "--" + key + "--"
}
