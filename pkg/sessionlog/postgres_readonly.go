package sessionlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// postgresReadOnlyStore is a PostgreSQL store opened by OpenReadOnly. Each read runs in its
// own read-only transaction rather than on a session set to default_transaction_read_only: a
// pooler in transaction mode (PgBouncer) would carry such a setting over to the manager's
// connections, and may refuse it as a startup parameter.
type postgresReadOnlyStore struct {
	pool *pgxpool.Pool
	url  string // redacted, for errors
}

var _ Store = (*postgresReadOnlyStore)(nil)

func openReadOnlyPostgres(ctx context.Context, url string) (Store, error) {
	redacted := connstr.Redact(url)
	cfg, err := parsePostgres(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres session log %s read-only: %w", redacted, err)
	}
	s := &postgresReadOnlyStore{pool: pool, url: redacted}
	if err := s.checkSchema(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// checkSchema refuses a database without the session log's schema, or with a newer one than
// this binary reads, as OpenReadOnly's SQLite open does for its file.
func (s *postgresReadOnlyStore) checkSchema(ctx context.Context) error {
	var (
		exists bool
		v      *int
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&exists); err != nil || !exists {
			return err
		}
		return tx.QueryRow(ctx, `SELECT max(version) FROM schema_version`).Scan(&v)
	})
	switch {
	case err != nil:
		return fmt.Errorf("open postgres session log %s read-only: reading its schema version: %w", s.url, err)
	case !exists || v == nil || *v < 1:
		return fmt.Errorf("no PostgreSQL session log in %s (the database has no session log schema): "+
			"check the URL; reading never creates one (the manager creates it when it first opens the store)", s.url)
	case *v > postgresSchemaVersion:
		return fmt.Errorf("postgres session log %s has schema version %d; this binary reads up to %d (upgrade the binary)", s.url, *v, postgresSchemaVersion)
	}
	return nil
}

// read runs f in a read-only transaction: the server itself refuses any write.
func (s *postgresReadOnlyStore) read(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, f)
}

func (s *postgresReadOnlyStore) refuse(op string) error {
	return fmt.Errorf("%s: the session log %s is open read-only", op, s.url)
}

func (s *postgresReadOnlyStore) Tail(ctx context.Context, sessionID string) (harness.Tail, error) {
	var t harness.Tail
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		t, err = pgLoadTail(ctx, tx, sessionID)
		return err
	})
	return t, err
}

func (s *postgresReadOnlyStore) ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error) {
	return pgReadFrom(ctx, s.pool, sessionID, fromSeq, limit)
}

func (s *postgresReadOnlyStore) Info(ctx context.Context, sessionID string) (SessionInfo, error) {
	var info SessionInfo
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		info, err = pgInfo(ctx, tx, sessionID)
		return err
	})
	return info, err
}

func (s *postgresReadOnlyStore) Identity(ctx context.Context) (string, error) {
	var id string
	err := s.read(ctx, func(tx pgx.Tx) error { return tx.QueryRow(ctx, identitySelect).Scan(&id) })
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return "", fmt.Errorf("the session log %s has no store identity yet (its schema predates it): a read-write open, such as the manager's, adds it", s.url)
	}
	if err != nil {
		return "", fmt.Errorf("read the store identity: %w", err)
	}
	return id, nil
}

func (s *postgresReadOnlyStore) Append(_ context.Context, sessionID string, _ []harness.Event) (harness.Tail, error) {
	return harness.Tail{}, s.refuse(fmt.Sprintf("append to session %q", sessionID))
}

func (s *postgresReadOnlyStore) Seed(_ context.Context, info SessionInfo, _ []harness.Event, _ Owner) (harness.Tail, error) {
	return harness.Tail{}, s.refuse(fmt.Sprintf("seed session %q", info.ID))
}

func (s *postgresReadOnlyStore) Fork(_ context.Context, srcID, dstID string, _ int64, _ Owner) (harness.Tail, error) {
	return harness.Tail{}, s.refuse(fmt.Sprintf("fork session %q into %q", srcID, dstID))
}

func (s *postgresReadOnlyStore) ClaimOwner(_ context.Context, sessionID string, _ Owner) (Owner, error) {
	return Owner{}, s.refuse(fmt.Sprintf("claim session %q", sessionID))
}

func (s *postgresReadOnlyStore) OwnerOf(ctx context.Context, sessionID string) (Owner, bool, error) {
	var (
		o  Owner
		ok bool
	)
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		o, ok, err = pgOwnerOf(ctx, tx, sessionID)
		return err
	})
	return o, ok, err
}

func (s *postgresReadOnlyStore) ReleaseOwner(_ context.Context, sessionID string, _ Owner) error {
	return s.refuse(fmt.Sprintf("release session %q", sessionID))
}

func (s *postgresReadOnlyStore) Close() error {
	s.pool.Close()
	return nil
}
