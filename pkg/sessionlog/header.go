package sessionlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The harness's session header carries more than the sessions row keeps: the project
// directory (cwd) the harness files the session under, the origin of a subagent's session, the
// agent preset it ran with and its delegation depth. They live in their own table beside the
// log, written with the session's creation and read by Info, so a log the harness wrote comes
// back out of the store (ExportJSONL, planlog export) with the header it had. The table is
// created on open like the owner table; a binary without it ignores it, and a store opened
// read-only before any binary created it reads no such fields.

const sqliteHeaderSchema = `
CREATE TABLE IF NOT EXISTS session_headers (
	session_id       TEXT PRIMARY KEY,
	cwd              TEXT,
	origin           TEXT,
	agent_preset     TEXT,
	delegation_depth INTEGER NOT NULL
) WITHOUT ROWID;`

const postgresHeaderSchema = `
CREATE TABLE IF NOT EXISTS session_headers (
	session_id       text PRIMARY KEY,
	cwd              text,
	origin           text,
	agent_preset     text,
	delegation_depth bigint NOT NULL
);`

const (
	sqliteInsertHeader   = `INSERT INTO session_headers (session_id, cwd, origin, agent_preset, delegation_depth) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING`
	postgresInsertHeader = `INSERT INTO session_headers (session_id, cwd, origin, agent_preset, delegation_depth) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id) DO NOTHING`
	sqliteSelectHeader   = `SELECT cwd, origin, agent_preset, delegation_depth FROM session_headers WHERE session_id = ?`
	postgresSelectHeader = `SELECT cwd, origin, agent_preset, delegation_depth FROM session_headers WHERE session_id = $1`
)

// hasHarnessFields reports whether the header carries any field of the session_headers table.
func (i SessionInfo) hasHarnessFields() bool {
	return i.Cwd != "" || i.Origin != "" || i.AgentPreset != "" || i.DelegationDepth != 0
}

// harnessFieldArgs are the session_headers columns after session_id, NULL for an empty string.
func (i SessionInfo) harnessFieldArgs() []any {
	null := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	return []any{null(i.Cwd), null(i.Origin), null(i.AgentPreset), i.DelegationDepth}
}

// scanHarnessFields reads a session_headers row into info; a session without one keeps its
// zero fields.
func scanHarnessFields(row interface{ Scan(...any) error }, info *SessionInfo, noRows func(error) bool) error {
	var cwd, origin, preset *string
	var depth int64
	if err := row.Scan(&cwd, &origin, &preset, &depth); err != nil {
		if noRows(err) {
			return nil
		}
		return fmt.Errorf("read the header fields of session %q: %w", info.ID, err)
	}
	for _, f := range []struct {
		dst *string
		src *string
	}{{&info.Cwd, cwd}, {&info.Origin, origin}, {&info.AgentPreset, preset}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	info.DelegationDepth = depth
	return nil
}

// harnessFields completes info from session_headers.
func (s *sqliteStore) harnessFields(ctx context.Context, info *SessionInfo) error {
	if s.noHeaderTable {
		return nil
	}
	return scanHarnessFields(s.r.QueryRowContext(ctx, sqliteSelectHeader, info.ID), info, func(err error) bool { return errors.Is(err, sql.ErrNoRows) })
}

// pgHarnessFields completes info from session_headers.
func pgHarnessFields(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, info *SessionInfo) error {
	return scanHarnessFields(q.QueryRow(ctx, postgresSelectHeader, info.ID), info, func(err error) bool { return errors.Is(err, pgx.ErrNoRows) })
}

// sqliteHasHeaderTable tells whether a file (opened read-only) has the session_headers table.
func sqliteHasHeaderTable(ctx context.Context, db *sql.DB) (bool, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'session_headers'`).Scan(&n); err != nil {
		return false, err
	}
	return n > 0, nil
}
