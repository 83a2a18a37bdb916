package sessionlog

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sqliteBackend(t *testing.T) testBackend {
	path := filepath.Join(t.TempDir(), "log.db")
	return testBackend{name: "sqlite", open: func(t *testing.T) Store {
		s, err := Open(context.Background(), "sqlite://"+path)
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		return s
	}}
}

// TestSQLiteDurabilitySettings checks the settings the durability statement in
// docs/sessionlog.md rests on, on both the writer and a reader connection.
func TestSQLiteDurabilitySettings(t *testing.T) {
	s, err := Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "log.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	st := unwrapBackend(s).(*sqliteStore)
	for name, db := range map[string]interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}{"writer": st.w, "reader": st.r} {
		var mode string
		var sync, busy int
		ctx := context.Background()
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 2 || busy != SQLiteBusyTimeoutMillis {
			t.Fatalf("%s: journal_mode=%s synchronous=%d busy_timeout=%d; want wal, 2 (FULL), %d", name, mode, sync, busy, SQLiteBusyTimeoutMillis)
		}
	}
}

// TestSQLiteCacheSizes checks that every connection a store opens, each of the pooled readers
// included and those of a store opened read-only, runs with the store's page cache size rather
// than SQLite's default.
func TestSQLiteCacheSizes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ro, err := OpenReadOnly(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ro.Close() }()
	st, rst := unwrapBackend(s).(*sqliteStore), unwrapBackend(ro).(*sqliteStore)
	for _, c := range []struct {
		name  string
		db    *sql.DB
		conns int
		want  int
	}{
		{"writer", st.w, 1, -sqliteWriterCacheKiB},
		{"reader", st.r, 4, -sqliteReaderCacheKiB},
		{"read-only store", rst.r, 4, -sqliteReaderCacheKiB},
	} {
		// Hold the pool's connections at once, so each is a connection of its own.
		var held []*sql.Conn
		for i := 0; i < c.conns; i++ {
			conn, err := c.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, conn)
			var got int
			if err := conn.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("%s connection %d: cache_size=%d; want %d", c.name, i+1, got, c.want)
			}
		}
		for _, conn := range held {
			_ = conn.Close()
		}
	}
}

func TestOpenURLs(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, u := range []string{"sqlite://rel.db", "sqlite://" + filepath.Join(dir, "abs.db")} {
		s, err := Open(context.Background(), u)
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		_ = s.Close()
	}
	for _, f := range []string{"rel.db", "abs.db"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s not created: %v", f, err)
		}
	}
	for u, want := range map[string]string{
		"mysql://x":                      "unknown store URL",
		"sqlite://":                      "no file path",
		"sqlite:///no/such/dir/x.db":     "does not exist",
		"sqlite:///tmp/x.db?mode=memory": "no query parameters",
		"redis://user:secret@host/0":     "user:xxxxx@host",
	} {
		_, err := Open(context.Background(), u)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret") {
			t.Fatalf("open %s: err = %v, want it to mention %q", u, err, want)
		}
	}
}
