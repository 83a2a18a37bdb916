package sessionlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// The store is the authority for who owns a session log: it records which AgentSession a log
// belongs to, and refuses in its own transactions whatever would let another session read or
// write it, whichever manager, agent or tool asks:
//
//   - a claim (ClaimOwner) by another AgentSession than the owner, in any namespace;
//   - a seed (an import, Seed) of a log another session owns;
//   - a fork (Fork) whose parent log is owned by a session of another namespace than the
//     child's, or is owned by nobody, or whose child log another session owns.
//
// The record outlives the AgentSession: a deleted session's log stays its own until an
// operator releases it (ReleaseOwner, `planlog release`), so nobody can claim or fork it by
// naming its session ID. The same namespace and name is the same session: one created again
// under its name (a GitOps re-apply) takes its log back, recording its new UID.
//
// The record lives in its own table beside the log, created on open like the rest of the
// schema; a binary without it ignores the table.

// Owner is the AgentSession a session log belongs to.
type Owner struct {
	Namespace string
	Name      string
	// UID of the AgentSession that claimed (or last re-claimed) the log; empty for a log an
	// import reserved for a session not created yet (its first claim records the UID).
	UID string
}

// SameSession reports whether o and other name the same AgentSession by namespace and name: a
// session deleted and created again under its name (a GitOps re-apply) keeps its log.
func (o Owner) SameSession(other Owner) bool {
	return o.Namespace == other.Namespace && o.Name == other.Name
}

// IsZero reports whether o names no session.
func (o Owner) IsZero() bool { return o.Namespace == "" && o.Name == "" }

func (o Owner) String() string { return o.Namespace + "/" + o.Name }

// OwnershipRefusal says which ownership rule refused a write.
type OwnershipRefusal string

const (
	// RefusedOwnedByAnother is a log that belongs to another AgentSession.
	RefusedOwnedByAnother OwnershipRefusal = "OwnedByAnother"
	// RefusedParentOfAnotherNamespace is a fork whose parent log belongs to a session of
	// another namespace than the child's.
	RefusedParentOfAnotherNamespace OwnershipRefusal = "ParentOfAnotherNamespace"
	// RefusedParentUnowned is a fork whose parent log belongs to no session (never claimed,
	// or released), so no namespace may read it.
	RefusedParentUnowned OwnershipRefusal = "ParentUnowned"
	// RefusedNotTheOwner is a release that named another owner than the one the record holds.
	RefusedNotTheOwner OwnershipRefusal = "NotTheOwner"
)

// OwnershipError is a write the store refused because of who owns a log; nothing was written.
// The message names no owner: the caller may not be allowed to know who it is.
type OwnershipError struct {
	Refusal   OwnershipRefusal
	SessionID string // the log the rule is about: the parent for Parent* refusals
	Requester Owner
}

func (e *OwnershipError) Error() string {
	switch e.Refusal {
	case RefusedParentOfAnotherNamespace:
		return fmt.Sprintf("session %q belongs to an AgentSession of another namespace: a fork copies its parent's events, so %s may only fork sessions of namespace %q",
			e.SessionID, e.Requester, e.Requester.Namespace)
	case RefusedParentUnowned:
		return fmt.Sprintf("session %q belongs to no AgentSession (never claimed, or released), so no namespace may fork it; "+
			"create an AgentSession for it first (its namespace may then fork it)", e.SessionID)
	case RefusedNotTheOwner:
		return fmt.Sprintf("session %q does not belong to %s: nothing released (planlog tail --session %s shows its owner)", e.SessionID, e.Requester, e.SessionID)
	default:
		return fmt.Sprintf("session %q belongs to another AgentSession: one log per session; choose another session ID", e.SessionID)
	}
}

// IsOwnershipRefusal reports whether err is (or wraps) an *OwnershipError.
func IsOwnershipRefusal(err error) bool {
	var o *OwnershipError
	return errors.As(err, &o)
}

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
WHERE session_owners.namespace = excluded.namespace AND session_owners.name = excluded.name AND session_owners.uid <> excluded.uid AND excluded.uid <> ''`
	sqliteReadOwner    = `SELECT namespace, name, uid FROM session_owners WHERE session_id = ?`
	sqliteDeleteOwner  = `DELETE FROM session_owners WHERE session_id = ? AND namespace = ? AND name = ?`
	postgresClaimOwner = `INSERT INTO session_owners (session_id, namespace, name, uid, claimed_at) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (session_id) DO UPDATE SET uid = excluded.uid, claimed_at = excluded.claimed_at
WHERE session_owners.namespace = excluded.namespace AND session_owners.name = excluded.name AND session_owners.uid <> excluded.uid AND excluded.uid <> ''`
	postgresReadOwner = `SELECT namespace, name, uid FROM session_owners WHERE session_id = $1`
	// A fork reads its parent's owner with a share lock, so a release waits for the fork.
	postgresReadOwnerShared = postgresReadOwner + ` FOR SHARE`
	postgresDeleteOwner     = `DELETE FROM session_owners WHERE session_id = $1 AND namespace = $2 AND name = $3`
)

func validOwner(sessionID string, o Owner) error {
	if sessionID == "" || o.Namespace == "" || o.Name == "" || o.UID == "" {
		return fmt.Errorf("claim session %q for %s (uid %q): session ID, namespace, name and uid are all required", sessionID, o, o.UID)
	}
	return nil
}

// seedOwnership is what a Seed checks and records in its own transaction.
type seedOwnership struct {
	// owner becomes the session's owner; the zero Owner records none and is refused when the
	// session has one.
	owner Owner
	// parent, for a fork: its log must be owned by a session of owner's namespace.
	parent string
}

// check applies the rules to the owners read in the seed's transaction: the session's
// (holder) and, for a fork, its parent's.
func (so seedOwnership) check(sessionID string, holder *Owner, parent *Owner) error {
	if holder != nil && (so.owner.IsZero() || !holder.SameSession(so.owner)) {
		return &OwnershipError{Refusal: RefusedOwnedByAnother, SessionID: sessionID, Requester: so.owner}
	}
	if so.parent == "" {
		return nil
	}
	if parent == nil {
		return &OwnershipError{Refusal: RefusedParentUnowned, SessionID: so.parent, Requester: so.owner}
	}
	if parent.Namespace != so.owner.Namespace {
		return &OwnershipError{Refusal: RefusedParentOfAnotherNamespace, SessionID: so.parent, Requester: so.owner}
	}
	return nil
}

type rowScanner interface{ Scan(dest ...any) error }

// scanOwner reads an owner row; nil for none.
func scanOwner(row rowScanner) (*Owner, error) {
	var o Owner
	err := row.Scan(&o.Namespace, &o.Name, &o.UID)
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// sqliteSeedOwnership checks and records so in the seed's transaction tx.
func sqliteSeedOwnership(ctx context.Context, tx *sql.Tx, sessionID string, so seedOwnership) error {
	holder, err := scanOwner(tx.QueryRowContext(ctx, sqliteReadOwner, sessionID))
	if err != nil {
		return fmt.Errorf("seed session %q: read its owner: %w", sessionID, err)
	}
	var parent *Owner
	if so.parent != "" {
		if parent, err = scanOwner(tx.QueryRowContext(ctx, sqliteReadOwner, so.parent)); err != nil {
			return fmt.Errorf("seed session %q: read the owner of %q: %w", sessionID, so.parent, err)
		}
	}
	if err := so.check(sessionID, holder, parent); err != nil {
		return err
	}
	if !so.owner.IsZero() {
		if _, err := tx.ExecContext(ctx, sqliteClaimOwner, sessionID, so.owner.Namespace, so.owner.Name, so.owner.UID, nowMillis()); err != nil {
			return fmt.Errorf("seed session %q: record its owner: %w", sessionID, err)
		}
	}
	return nil
}

// pgQueueSeedOwnership queues, in a seed's first batch, the reads so.check needs and the
// record of the owner (a claim, which takes the owner row's lock); check runs once the batch's
// results are read.
func pgQueueSeedOwnership(b *pgx.Batch, sessionID string, so seedOwnership, check *func() error) {
	var holder, parent *Owner
	if !so.owner.IsZero() {
		b.Queue(postgresClaimOwner, sessionID, so.owner.Namespace, so.owner.Name, so.owner.UID, nowMillis())
	}
	b.Queue(postgresReadOwner+` FOR UPDATE`, sessionID).QueryRow(func(row pgx.Row) error {
		var err error
		holder, err = scanOwner(row)
		return err
	})
	if so.parent != "" {
		b.Queue(postgresReadOwnerShared, so.parent).QueryRow(func(row pgx.Row) error {
			var err error
			parent, err = scanOwner(row)
			return err
		})
	}
	*check = func() error { return so.check(sessionID, holder, parent) }
}

// claimChanges reports whether a claim by owner would change the owner record held: only
// when the log is unowned (not held), or held by the same namespace/name under another UID (a
// session re-created under its name takes its log over), as the claim statements' WHERE says.
// Anything else the claim would leave as it is, so a claim reads first and writes only then:
// a manager taking on sessions it already owns (a restart) makes no store write and takes
// no write lock.
func claimChanges(held Owner, ok bool, owner Owner) bool {
	return !ok || held.Namespace == owner.Namespace && held.Name == owner.Name && held.UID != owner.UID && owner.UID != ""
}

func (s *sqliteStore) ClaimOwner(ctx context.Context, sessionID string, owner Owner) (Owner, error) {
	if err := validOwner(sessionID, owner); err != nil {
		return Owner{}, err
	}
	if held, ok, err := s.OwnerOf(ctx, sessionID); err != nil {
		return Owner{}, fmt.Errorf("claim session %q: %w", sessionID, err)
	} else if !claimChanges(held, ok, owner) {
		return held, nil
	}
	var got Owner
	err := s.inTx(ctx, "claim session "+strconv.Quote(sessionID), func(ctx context.Context, tx *sql.Tx) error {
		var err error
		got, err = s.claimsIn(ctx, tx).claim(ctx, sessionID, owner, nowMillis())
		return err
	})
	return got, err
}

// sqliteClaims is a claim's two statements bound to one write transaction.
type sqliteClaims struct{ upsert, read *sql.Stmt }

func (s *sqliteStore) claimsIn(ctx context.Context, tx *sql.Tx) sqliteClaims {
	return sqliteClaims{upsert: tx.StmtContext(ctx, s.claimW), read: tx.StmtContext(ctx, s.ownerW)}
}

// claim claims the log of sessionID for owner and reads back the owner that holds it: the
// claim and its read-back are one step.
func (c sqliteClaims) claim(ctx context.Context, sessionID string, owner Owner, now int64) (Owner, error) {
	if _, err := c.upsert.ExecContext(ctx, sessionID, owner.Namespace, owner.Name, owner.UID, now); err != nil {
		return Owner{}, fmt.Errorf("claim session %q: %w", sessionID, err)
	}
	var got Owner
	if err := c.read.QueryRowContext(ctx, sessionID).Scan(&got.Namespace, &got.Name, &got.UID); err != nil {
		return Owner{}, fmt.Errorf("claim session %q: read the owner back: %w", sessionID, err)
	}
	return got, nil
}

func (s *postgresStore) ClaimOwner(ctx context.Context, sessionID string, owner Owner) (Owner, error) {
	if err := validOwner(sessionID, owner); err != nil {
		return Owner{}, err
	}
	if held, ok, err := s.OwnerOf(ctx, sessionID); err != nil {
		return Owner{}, fmt.Errorf("claim session %q: %w", sessionID, err)
	} else if !claimChanges(held, ok, owner) {
		return held, nil
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

func (s *sqliteStore) OwnerOf(ctx context.Context, sessionID string) (Owner, bool, error) {
	var row *sql.Row
	if s.ownerR != nil {
		row = s.ownerR.QueryRowContext(ctx, sessionID)
	} else {
		row = s.r.QueryRowContext(ctx, sqliteReadOwner, sessionID)
	}
	o, err := scanOwner(row)
	if err != nil {
		return Owner{}, false, fmt.Errorf("read the owner of session %q: %w", sessionID, err)
	}
	if o == nil {
		return Owner{}, false, nil
	}
	return *o, true, nil
}

func (s *postgresStore) OwnerOf(ctx context.Context, sessionID string) (Owner, bool, error) {
	return pgOwnerOf(ctx, s.pool, sessionID)
}

func pgOwnerOf(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sessionID string) (Owner, bool, error) {
	o, err := scanOwner(q.QueryRow(ctx, postgresReadOwner, sessionID))
	if err != nil {
		return Owner{}, false, fmt.Errorf("read the owner of session %q: %w", sessionID, err)
	}
	if o == nil {
		return Owner{}, false, nil
	}
	return *o, true, nil
}

// releaseResult turns a release's deleted row count into its answer: nothing deleted means
// the record names another owner, or none.
func releaseResult(sessionID string, holder Owner, deleted int64, found *Owner) error {
	if deleted == 1 {
		return nil
	}
	if found == nil {
		return fmt.Errorf("session %q belongs to no AgentSession: nothing to release", sessionID)
	}
	return &OwnershipError{Refusal: RefusedNotTheOwner, SessionID: sessionID, Requester: holder}
}

func validRelease(sessionID string, holder Owner) error {
	if sessionID == "" || holder.Namespace == "" || holder.Name == "" {
		return fmt.Errorf("release session %q from %s: the session ID and the owner's namespace and name are required", sessionID, holder)
	}
	return nil
}

func (s *sqliteStore) ReleaseOwner(ctx context.Context, sessionID string, holder Owner) error {
	if err := validRelease(sessionID, holder); err != nil {
		return err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("release session %q: begin: %w", sessionID, err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, sqliteDeleteOwner, sessionID, holder.Namespace, holder.Name)
	if err != nil {
		return fmt.Errorf("release session %q: %w", sessionID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("release session %q: %w", sessionID, err)
	}
	found, err := scanOwner(tx.QueryRowContext(ctx, sqliteReadOwner, sessionID))
	if err != nil {
		return fmt.Errorf("release session %q: %w", sessionID, err)
	}
	if err := releaseResult(sessionID, holder, n, found); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("release session %q: commit: %w", sessionID, err)
	}
	return nil
}

func (s *postgresStore) ReleaseOwner(ctx context.Context, sessionID string, holder Owner) error {
	if err := validRelease(sessionID, holder); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, postgresDeleteOwner, sessionID, holder.Namespace, holder.Name)
		if err != nil {
			return fmt.Errorf("release session %q: %w", sessionID, err)
		}
		found, err := scanOwner(tx.QueryRow(ctx, postgresReadOwner, sessionID))
		if err != nil {
			return fmt.Errorf("release session %q: %w", sessionID, err)
		}
		return releaseResult(sessionID, holder, tag.RowsAffected(), found)
	})
}
