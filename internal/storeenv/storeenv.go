// Package storeenv resolves the session-log store URL from the environment, the same way in
// every binary: PLANMODE_LOG_STORE, or one of the names older releases read, with a warning
// that names the variable to use instead.
package storeenv

import (
	"fmt"
	"io"
	"os"
)

// Name is the environment variable every binary reads the store URL from. An environment
// variable keeps a PostgreSQL password out of shell history and process listings.
const Name = "PLANMODE_LOG_STORE"

// Deprecated are the names earlier releases read, one per binary; still honoured, with a warning.
var Deprecated = []string{"KUBECTL_PLAN_STORE", "PLANLOG_STORE", "SESSION_LOG_URL"}

// Lookup returns the store URL from the environment and the variable it came from; it writes a
// deprecation warning to warn when only an old name is set, and a conflict warning when an old
// name disagrees with Name. Empty when none is set.
func Lookup(warn io.Writer) (url, from string) {
	return lookup(os.Getenv, warn)
}

func lookup(getenv func(string) string, warn io.Writer) (string, string) {
	url, from := getenv(Name), Name
	for _, old := range Deprecated {
		v := getenv(old)
		if v == "" {
			continue
		}
		switch {
		case url == "":
			url, from = v, old
			warnf(warn, "warning: %s is deprecated; set %s instead (same value)\n", old, Name)
		case v != url:
			warnf(warn, "warning: %s is deprecated and differs from %s; using %s\n", old, Name, from)
		}
	}
	return url, from
}

func warnf(w io.Writer, format string, a ...any) {
	if w != nil {
		_, _ = fmt.Fprintf(w, format, a...)
	}
}
