package sessionlog

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/harness-dev/planmode-operator/internal/testutil/pgtest"
)

// One throwaway PostgreSQL server per test binary, started on first use; each test that
// needs it gets its own database.
var (
	pgOnce   sync.Once
	pgServer *pgtest.Server
	pgErr    error
	pgDBSeq  atomic.Int64
)

func TestMain(m *testing.M) {
	if os.Getenv(durabilityChildEnv) != "" {
		os.Exit(durabilityChild())
	}
	code := m.Run()
	benchCleanup()
	if pgServer != nil {
		if err := pgServer.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
		}
	}
	os.Exit(code)
}

// postgresDB returns the URL of a fresh database on the shared server, failing (never
// skipping) when the server cannot start.
func postgresDB(tb testing.TB) string {
	tb.Helper()
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), pgtest.StartTimeout)
		defer cancel()
		pgServer, pgErr = pgtest.Start(ctx)
	})
	if pgErr != nil {
		tb.Fatalf("pgtest: %v", pgErr)
	}
	tb.Logf("PostgreSQL server: %s (127.0.0.1:%d)", pgServer.Version, pgServer.Port)
	url, err := pgServer.CreateDatabase(context.Background(), fmt.Sprintf("t%d", pgDBSeq.Add(1)))
	if err != nil {
		tb.Fatal(err)
	}
	return url
}

func postgresBackend(t *testing.T) testBackend {
	url := postgresDB(t)
	return testBackend{name: "postgres", open: func(t *testing.T) Store {
		s, err := Open(context.Background(), url)
		if err != nil {
			t.Fatalf("open %s: %v", url, err)
		}
		return s
	}}
}

func TestPostgresConformance(t *testing.T) {
	runConformance(t, postgresBackend(t))
}

// PoolSize sizes the pool unless the URL does; the URL's pool_max_conns wins.
func TestPostgresPoolSize(t *testing.T) {
	url := postgresDB(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		url  string
		opts []Option
		want int32
	}{
		{"no option: pgx's default", url, nil, int32(max(4, runtime.NumCPU()))},
		{"PoolSize with no pool_max_conns in the URL", url, []Option{PoolSize(24)}, 24},
		{"the URL's pool_max_conns over PoolSize", url + "&pool_max_conns=3", []Option{PoolSize(24)}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, tc.url, tc.opts...)
			if err != nil {
				t.Fatalf("open %s: %v", tc.url, err)
			}
			defer s.Close()
			if got := s.(*postgresStore).pool.Config().MaxConns; got != tc.want {
				t.Fatalf("pool MaxConns = %d, want %d", got, tc.want)
			}
		})
	}
}
