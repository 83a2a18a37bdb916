package main

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
)

// A store that cannot be opened fails the start with an error that names the store without
// its password, whichever form the connection string has.
func TestOpenStoreErrorNeverShowsThePassword(t *testing.T) {
	for _, url := range []string{
		"postgres://planmode:s3cret@127.0.0.1:1/log?sslmode=disable&connect_timeout=1",
		"postgres://planmode@127.0.0.1:1/log?sslmode=disable&password=s3cret&connect_timeout=1",
		"host=127.0.0.1 port=1 user=planmode password='s3cret with blanks' dbname=log",
		"sqlite:///tmp/log.db?password=s3cret",
	} {
		_, err := openStore(context.Background(), url, 1, time.Second)
		if err == nil {
			t.Fatalf("openStore(%s) succeeded", connstr.Redact(url))
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "blanks") {
			t.Errorf("openStore error shows the password: %v", err)
		}
	}
}

func TestBadOptionsNameTheFlag(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs, &o)
	if err := fs.Parse([]string{"--events=maybe", "--max-concurrent-reconciles=0", "--log-store-timeout=0s", "--session-decoder=fast"}); err != nil {
		t.Fatal(err)
	}
	err := checkOptions(&o)
	if err == nil {
		t.Fatal("bad options accepted")
	}
	for _, f := range []string{"--events", "--max-concurrent-reconciles", "--log-store-timeout", "--session-decoder"} {
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
	if ok.logStore != defaultLogStore || ok.webhook.Port != 9443 || ok.sessionDecoder != "jsonv2" {
		t.Fatalf("defaults: log store %q, webhook port %d, session decoder %q", ok.logStore, ok.webhook.Port, ok.sessionDecoder)
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
