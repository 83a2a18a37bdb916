package sessionlog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// One log per session: the store records which AgentSession a session log belongs to, so a
// second AgentSession naming the same session ID (in any namespace) is recognised and refused
// by the manager instead of writing into another session's log. The record lives in its own
// table beside the log, created on open like the rest of the schema; a binary without it
// ignores the table.

// Owner is the AgentSession a session log belongs to.
type Owner struct {
	Namespace string
	Name      string
	// UID of the AgentSession that claimed (or last re-claimed) the log.
	UID string
}

// SameSession reports whether o and other name the same AgentSession by namespace and name: a
// session deleted and created again under its name (a GitOps re-apply) keeps its log.
func (o Owner) SameSession(other Owner) bool {
	return o.Namespace == other.Namespace && o.Name == other.Name
}

func (o Owner) String() string { return o.Namespace + "/" + o.Name }

const sqliteOwnerSchema = `
CREATE TABLE IF NOT EXISTS session_owners (
	session_id TEXT PRIMARY KEY,
	namespace  TEXT NOT NULL,
	name       TEXT NOT NULL,
	uid        TEXT NOT NULL,
	claimed_at INTEGER NOT NULL
) WITHOUT ROWID;`

const postgresOwnerSchema = `
CREATE TABLE IF NOT EXISTS session_owners (
	session_id text PRIMARY KEY,
	namespace  text NOT NULL,
	name       text NOT NULL,
	uid        text NOT NULL,
	claimed_at bigint NOT NULL
);`

// The claim is one statement: insert the owner when the log has none, or re-record the UID
// when the same namespace/name claims it again; any other owner stays as it is. The row read
// back is the owner that holds the log.
const (
	sqliteClaimOwner = `INSERT INTO session_owners (session_id, namespace, name, uid, claimed_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (session_id) DO UPDATE SET uid = excluded.uid, claimed_at = excluded.claimed_at
WHERE session_owners.namespace = excluded.namespace AND session_owners.name = excluded.name AND session_owners.uid <> excluded.uid`
	sqliteReadOwner    = `SELECT namespace, name, uid FROM session_owners WHERE session_id = ?`
	postgresClaimOwner = `INSERT INTO session_owners (session_id, namespace, name, uid, claimed_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (session_id) DO UPDATE SET uid = excluded.uid, claimed_at = excluded.claimed_at
WHERE session_owners.namespace = excluded.namespace AND session_owners.name = excluded.name AND session_owners.uid <> excluded.uid`
	postgresReadOwner = `SELECT namespace, name, uid FROM session_owners WHERE session_id = $1`
)

func validOwner(sessionID string, o Owner) error {
	if sessionID == "" || o.Namespace == "" || o.Name == "" || o.UID == "" {
		return fmt.Errorf("claim session %q for %s (uid %q): session ID, namespace, name and uid are all required", sessionID, o, o.UID)
	}
	return nil
}

func (s *sqliteStore) ClaimOwner(ctx context.Context, sessionID string, owner Owner) (Owner, error) {
	if err := validOwner(sessionID, owner); err != nil {
		return Owner{}, err
	}
	tx, err := s.w.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the claim and its read-back are one step
	if err != nil {
		return Owner{}, fmt.Errorf("claim session %q: begin: %w", sessionID, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, sqliteClaimOwner, sessionID, owner.Namespace, owner.Name, owner.UID, nowMillis()); err != nil {
		return Owner{}, fmt.Errorf("claim session %q: %w", sessionID, err)
	}
	var got Owner
	if err := tx.QueryRowContext(ctx, sqliteReadOwner, sessionID).Scan(&got.Namespace, &got.Name, &got.UID); err != nil {
		return Owner{}, fmt.Errorf("claim session %q: read the owner back: %w", sessionID, err)
	}
	if err := tx.Commit(); err != nil {
		return Owner{}, fmt.Errorf("claim session %q: commit: %w", sessionID, err)
	}
	return got, nil
}

func (s *postgresStore) ClaimOwner(ctx context.Context, sessionID string, owner Owner) (Owner, error) {
	if err := validOwner(sessionID, owner); err != nil {
		return Owner{}, err
	}
	var got Owner
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, postgresClaimOwner, sessionID, owner.Namespace, owner.Name, owner.UID, nowMillis()); err != nil {
			return err
		}
		// The insert took the row's lock (or waited for a concurrent claim to commit), so the
		// row read here is the one that holds.
		return tx.QueryRow(ctx, postgresReadOwner, sessionID).Scan(&got.Namespace, &got.Name, &got.UID)
	})
	if err != nil {
		return Owner{}, fmt.Errorf("claim session %q: %w", sessionID, err)
	}
	return got, nil
}
