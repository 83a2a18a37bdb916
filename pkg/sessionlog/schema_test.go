package sessionlog

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A database written by a newer binary is refused on open, read-write or read-only, not misread.
func TestSchemaVersionNewerRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		url := "sqlite://" + filepath.Join(t.TempDir(), "log.db")
		s, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unwrapBackend(s).(*sqliteStore).w.ExecContext(ctx, `UPDATE schema_version SET version = 99`); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		if _, err := Open(ctx, url); err == nil || !strings.Contains(err.Error(), "schema version 99") {
			t.Fatalf("open of a newer schema: err = %v", err)
		}
		if _, err := OpenReadOnly(ctx, url); err == nil || !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "upgrade the binary") {
			t.Fatalf("read-only open of a newer schema: err = %v", err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		url := postgresDB(t)
		s, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unwrapBackend(s).(*postgresStore).pool.Exec(ctx, `UPDATE schema_version SET version = 99`); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		if _, err := Open(ctx, url); err == nil || !strings.Contains(err.Error(), "schema version 99") {
			t.Fatalf("open of a newer schema: err = %v", err)
		}
		if _, err := OpenReadOnly(ctx, url); err == nil || !strings.Contains(err.Error(), "schema version 99") || !strings.Contains(err.Error(), "upgrade the binary") {
			t.Fatalf("read-only open of a newer schema: err = %v", err)
		}
	})
}

// Processes starting at once against a fresh database create the schema exactly once.
func TestPostgresConcurrentOpenMigratesOnce(t *testing.T) {
	ctx := context.Background()
	url := postgresDB(t)
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(ctx, url)
			if err == nil {
				_ = s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var rows, version int
	if err := conn.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_version`).Scan(&rows, &version); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || version != postgresSchemaVersion {
		t.Fatalf("schema_version has %d rows, max %d; want 1 row, %d", rows, version, postgresSchemaVersion)
	}
}
