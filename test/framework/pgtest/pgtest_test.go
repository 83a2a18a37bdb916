package pgtest

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestStartQueryStop(t *testing.T) {
	s := MustStart(t)
	ctx := context.Background()
	if !strings.HasPrefix(s.Version, "PostgreSQL ") {
		t.Fatalf("version = %q", s.Version)
	}
	url, err := s.CreateDatabase(ctx, "scratch")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var db string
	var fsync string
	if err := conn.QueryRow(ctx, "SELECT current_database(), current_setting('fsync')").Scan(&db, &fsync); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if db != "scratch" || fsync != "on" {
		t.Fatalf("database %q fsync %q; want scratch, on", db, fsync)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("data directory %s still exists after Stop: %v", s.Dir, err)
	}
	if _, err := pgx.Connect(ctx, s.URL); err == nil {
		t.Fatal("server still accepts connections after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestMissingBinariesFailLoudly(t *testing.T) {
	t.Setenv(BinDirEnv, t.TempDir())
	if _, err := Start(context.Background()); err == nil || !strings.Contains(err.Error(), "does not contain initdb and postgres") {
		t.Fatalf("Start with an empty %s: err = %v", BinDirEnv, err)
	}
	t.Setenv(BinDirEnv, "")
	t.Setenv("PATH", t.TempDir())
	saved := debianBinGlob
	debianBinGlob = "/nonexistent/postgresql/*/bin"
	defer func() { debianBinGlob = saved }()
	_, err := Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "make postgres") || !strings.Contains(err.Error(), "/usr/lib/postgresql/*/bin") {
		t.Fatalf("Start without binaries: err = %v, want a failure pointing at make postgres", err)
	}
}
