package plancli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --web's flags are refused without it, and --web with what prints instead of serving.
func TestWebFlags(t *testing.T) {
	t.Setenv(StoreEnv, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"review", "demo", "--port", "8080"}, "--port goes with --web (kubectl plan review --web --port ...)"},
		{[]string{"review", "demo", "--no-open"}, "--no-open goes with --web"},
		{[]string{"review", "demo", "--keep"}, "--keep goes with --web"},
		{[]string{"inbox", "--port", "8080"}, "--port goes with --web (kubectl plan inbox --web --port ...)"},
		{[]string{"review", "demo", "--web", "--raw"}, "[raw web] were all set"},
		{[]string{"review", "demo", "--web", "--wait"}, "[wait web] were all set"},
		{[]string{"review", "demo", "--web", "--port", "70000"}, "--port 70000: want a port from 1 to 65535, or 0 for a free one"},
		{[]string{"inbox", "demo"}, `unknown command "demo" for "kubectl plan inbox"`},
	} {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("kubectl plan %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// $BROWSER opens the URL: its first command, with %s replaced, or the URL appended.
func TestBrowserOpener(t *testing.T) {
	if browserOpener("") != nil || browserOpener("  ") != nil {
		t.Fatal("no $BROWSER: nothing is opened")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "browser")
	// A FIFO: reading it waits for the browser to have written its arguments.
	got := filepath.Join(dir, "got")
	if err := syscall.Mkfifo(got, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" > "+got+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ browser, want string }{
		{script, "http://127.0.0.1:1/t/inbox"},
		{script + " --new-window %s:firefox", "--new-window http://127.0.0.1:1/t/inbox"},
	} {
		read := make(chan []byte, 1)
		go func() {
			data, _ := os.ReadFile(got)
			read <- data
		}()
		if err := browserOpener(tc.browser)("http://127.0.0.1:1/t/inbox"); err != nil {
			t.Fatal(err)
		}
		var data []byte
		select {
		case data = <-read:
		case <-time.After(10 * time.Second):
			t.Fatalf("BROWSER=%q did not run within 10s", tc.browser)
		}
		if strings.TrimSpace(string(data)) != tc.want {
			t.Errorf("BROWSER=%q ran with %q, want %q", tc.browser, data, tc.want)
		}
	}
}
