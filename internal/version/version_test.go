package version

import (
	"strings"
	"testing"
)

func TestStringPrefersLinkerValues(t *testing.T) {
	oldV, oldC := Version, Commit
	t.Cleanup(func() { Version, Commit = oldV, oldC })
	Version, Commit = "v1.2.3", "0123456789abcdef0123"
	got := String("manager")
	if !strings.HasPrefix(got, "manager v1.2.3 (commit 0123456789ab") {
		t.Fatalf("String = %q, want the linker-set version and a 12-character commit", got)
	}
}

func TestStringWithoutLinkerValues(t *testing.T) {
	oldV, oldC := Version, Commit
	t.Cleanup(func() { Version, Commit = oldV, oldC })
	Version, Commit = "", ""
	if got := Get().Version; got == "" {
		t.Fatal("Get().Version is empty; want a fallback such as devel")
	}
}
