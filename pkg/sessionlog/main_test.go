package sessionlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
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
			if got := unwrapBackend(s).(*postgresStore).pool.Config().MaxConns; got != tc.want {
				t.Fatalf("pool MaxConns = %d, want %d", got, tc.want)
			}
		})
	}
}

// A refused append rolls its transaction back and its connection goes back to the pool for
// the next write, and the session's tail row is not left locked: another writer's append goes
// through at once. (pgxpool would close a connection released inside a transaction, which
// frees the lock too, but every conflict would then cost a new connection.) Both cases: a seq
// conflict (after the locked read) and an insert the server refuses (in the second round trip).
func TestPostgresRefusedAppendReleasesTheTailLock(t *testing.T) {
	url := postgresDB(t)
	ctx := context.Background()
	a, err := Open(ctx, url+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const id = "refused"
	tail := mustAppend(t, a, id, benchEvents(0, 6)...)
	pool := unwrapBackend(a).(*postgresStore).pool
	conns := pool.Stat().NewConnsCount()

	appendFromB := func(what string) {
		t.Helper()
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		got, err := b.Append(actx, id, benchEvents(tail.NextSeq, 1))
		if err != nil {
			t.Fatalf("after %s, another writer's append: %v (the tail row is still locked)", what, err)
		}
		tail = got
	}

	// A conflict: the seq is already taken.
	_, err = a.Append(ctx, id, benchEvents(tail.NextSeq-1, 1))
	var conflict *ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("append at a taken seq: %v, want a ConflictError", err)
	}
	appendFromB("a conflict")

	// An insert the server refuses once the row is locked: an event row already there at the
	// next seq (as a writer that bypassed the tail would leave), so the primary key refuses it.
	if _, err := pool.Exec(ctx, `INSERT INTO events (session_id, seq, type, time, data) VALUES ($1, $2, 'user/message', 0, '{}')`,
		id, tail.NextSeq); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, id, benchEvents(tail.NextSeq, 1)); err == nil {
		t.Fatal("append over an existing event row succeeded; want the primary key's refusal")
	}
	if _, err := pool.Exec(ctx, `DELETE FROM events WHERE session_id = $1 AND seq = $2`, id, tail.NextSeq); err != nil {
		t.Fatal(err)
	}
	appendFromB("a refused insert")
	if got := pool.Stat().NewConnsCount(); got != conns {
		t.Fatalf("the writer's pool opened %d connections after the refused appends; want none (rolled back and reused)", got-conns)
	}
	if got := readAll(t, b, id); int64(len(got)) != tail.NextSeq {
		t.Fatalf("%d events, want %d", len(got), tail.NextSeq)
	}
}

// An append the server fails names the session once and the step that failed: the batch that
// begins the transaction, creates the session row and reads the tail has two steps that fail
// differently, and an operator needs to know which one.
func TestPostgresAppendErrorNamesTheSessionAndTheStep(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, alter, want, notWant string
	}{
		// The row is created, but its tail cannot be read back as a tail.
		{"read the tail", `ALTER TABLE sessions ALTER COLUMN turn_open TYPE text`,
			`append to session "s": read the tail: `, "begin or create"},
		// The row cannot be created.
		{"create the row", `ALTER TABLE sessions ADD CONSTRAINT refuse_s CHECK (session_id <> 's')`,
			`append to session "s": begin or create the session row: `, "read the tail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, postgresDB(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := unwrapBackend(s).(*postgresStore).pool.Exec(ctx, tc.alter); err != nil {
				t.Fatal(err)
			}
			_, err = s.Append(ctx, "s", benchEvents(0, 1))
			if err == nil {
				t.Fatal("append succeeded; want the server's refusal")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.want) || strings.Contains(msg, tc.notWant) || strings.Count(msg, `"s"`) != 1 {
				t.Fatalf("append error %q: want it to start %q, name the session once and not say %q", msg, tc.want, tc.notWant)
			}
		})
	}
}
