package main

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedactURLNeverShowsThePassword(t *testing.T) {
	cases := map[string]string{
		"postgres://planmode:s3cret@db:5432/log?sslmode=require":     "postgres://planmode:xxxxx@db:5432/log?sslmode=require",
		"postgres://planmode@db/log?password=s3cret&sslmode=disable": "postgres://planmode@db/log?password=xxxxx&sslmode=disable",
		"sqlite://.planmode/sessions.db":                             "sqlite://.planmode/sessions.db",
		"postgres://u:s3cret@[::1:bad":                               "<unparseable store URL>",
	}
	for in, want := range cases {
		got := RedactURL(in)
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	msg := redactText(`dial postgres://planmode:s3cret@db failed; password=s3cret`, "postgres://planmode:s3cret@db")
	if strings.Contains(msg, "s3cret") {
		t.Fatalf("redactText kept the password: %s", msg)
	}
}

func TestBadOptionsNameTheFlag(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs, &o)
	if err := fs.Parse([]string{"--events=maybe", "--event-max-hold=-1s", "--max-concurrent-reconciles=0", "--pending-poll=0s"}); err != nil {
		t.Fatal(err)
	}
	err := checkOptions(&o)
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, f := range []string{"--events", "--event-max-hold", "--max-concurrent-reconciles", "--pending-poll"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
	var ok options
	fs = flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs, &ok)
	if err := fs.Parse(nil); err != nil || checkOptions(&ok) != nil {
		t.Fatalf("defaults rejected: %v %v", err, checkOptions(&ok))
	}
	if ok.logStore != defaultLogStore || ok.webhook.Port != 9443 {
		t.Fatalf("defaults: log store %q, webhook port %d", ok.logStore, ok.webhook.Port)
	}
}

func TestOnlyTheDefaultLogDirectoryIsCreated(t *testing.T) {
	root := t.TempDir()
	typo := filepath.Join(root, "var", "lib", "plnmode", "log.db")
	err := ensureSQLiteDir("sqlite://"+typo, false)
	if err == nil || !strings.Contains(err.Error(), filepath.Dir(typo)) || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("ensureSQLiteDir(missing dir) = %v, want an error naming %s", err, filepath.Dir(typo))
	}
	if _, err := os.Stat(filepath.Join(root, "var")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a directory was created for a non-default store: %v", err)
	}
	existing := filepath.Join(root, "log.db")
	if err := ensureSQLiteDir("sqlite://"+existing, false); err != nil {
		t.Fatalf("existing directory refused: %v", err)
	}
	t.Chdir(root)
	if err := ensureSQLiteDir(defaultLogStore, true); err != nil {
		t.Fatalf("default store directory: %v", err)
	}
	if st, err := os.Stat(filepath.Join(root, ".planmode")); err != nil || !st.IsDir() {
		t.Fatalf("the default directory was not created: %v", err)
	}
}
