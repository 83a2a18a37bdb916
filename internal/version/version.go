// Package version is the one build identity every binary of this repository prints with
// --version. The Makefile sets Version and Commit with -ldflags -X; a plain `go build` falls
// back to what the Go toolchain recorded in the binary (module version and VCS revision).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at link time: go build -ldflags "-X github.com/harness-dev/planmode-operator/internal/version.Version=v0.3.0 ...".
var (
	Version = ""
	Commit  = ""
)

// Info is what a binary reports about its build.
type Info struct {
	Version string
	Commit  string
	Dirty   bool
	Go      string
}

// Get returns the build identity, preferring the linker-set values over the toolchain's.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if i.Commit == "" {
					i.Commit = s.Value
				}
			case "vcs.modified":
				i.Dirty = s.Value == "true"
			}
		}
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	return i
}

// String is the one line --version prints, prefixed with the binary's name.
func String(binary string) string {
	i := Get()
	commit := i.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	if i.Dirty {
		commit += "-dirty"
	}
	return fmt.Sprintf("%s %s (commit %s, %s)", binary, i.Version, commit, i.Go)
}
