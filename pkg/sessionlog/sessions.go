package sessionlog

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// SessionState is one session as the store holds it: its log's tail and its owner record.
type SessionState struct {
	ID string
	// Tail is harness.EmptyTail() for a session with an owner record and no event yet.
	Tail harness.Tail
	// Owner is zero for a log no AgentSession owns.
	Owner Owner
}

// One statement, so one snapshot: every row as of the same moment. A full outer join, since a
// claimed session may have no event yet and an unclaimed log no owner.
const sessionsQuery = `SELECT COALESCE(s.session_id, o.session_id), s.next_seq, s.active, s.last_plan_mode_seq, s.told,
	s.turn_open, s.turn, s.last_step_start_seq, s.step, s.step_open, o.namespace, o.name, o.uid
FROM sessions s FULL OUTER JOIN session_owners o ON o.session_id = s.session_id`

// sessionRow is a row of sessionsQuery with its NULLs (the side of the join that is missing).
type sessionRow struct {
	id                                   string
	nextSeq, lastPlanModeSeq, turn, step sql.NullInt64
	lastStepStartSeq                     sql.NullInt64
	active, told, turnOpen, stepOpen     sql.NullBool
	namespace, name, uid                 sql.NullString
}

func (r *sessionRow) dest() []any {
	return []any{&r.id, &r.nextSeq, &r.active, &r.lastPlanModeSeq, &r.told, &r.turnOpen, &r.turn, &r.lastStepStartSeq,
		&r.step, &r.stepOpen, &r.namespace, &r.name, &r.uid}
}

func (r *sessionRow) state() SessionState {
	st := SessionState{ID: r.id, Tail: harness.EmptyTail()}
	if r.nextSeq.Valid {
		st.Tail = harness.Tail{NextSeq: r.nextSeq.Int64, Active: r.active.Bool, LastPlanModeSeq: r.lastPlanModeSeq.Int64,
			TurnOpen: r.turnOpen.Bool, Turn: r.turn.Int64, LastStepStartSeq: r.lastStepStartSeq.Int64, Step: r.step.Int64, StepOpen: r.stepOpen.Bool}
		if r.told.Valid {
			b := r.told.Bool
			st.Tail.LastShown = &b
		}
	}
	if r.namespace.Valid {
		st.Owner = Owner{Namespace: r.namespace.String, Name: r.name.String, UID: r.uid.String}
	}
	return st
}

func (s *sqliteStore) Sessions(ctx context.Context, fn func(SessionState) error) error {
	rows, err := s.r.QueryContext(ctx, sessionsQuery)
	if err != nil {
		return fmt.Errorf("read every session's tail and owner: %w", err)
	}
	defer rows.Close()
	return scanSessions(rows, fn)
}

func (s *postgresStore) Sessions(ctx context.Context, fn func(SessionState) error) error {
	return pgSessions(ctx, s.pool, fn)
}

func (s *postgresReadOnlyStore) Sessions(ctx context.Context, fn func(SessionState) error) error {
	return s.read(ctx, func(tx pgx.Tx) error { return pgSessions(ctx, tx, fn) })
}

func pgSessions(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, fn func(SessionState) error) error {
	rows, err := q.Query(ctx, sessionsQuery)
	if err != nil {
		return fmt.Errorf("read every session's tail and owner: %w", err)
	}
	defer rows.Close()
	return scanSessions(rows, fn)
}

// scanSessions calls fn with each row of sessionsQuery, from either backend's rows.
func scanSessions(rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}, fn func(SessionState) error) error {
	var r sessionRow
	for rows.Next() {
		if err := rows.Scan(r.dest()...); err != nil {
			return fmt.Errorf("read every session's tail and owner: %w", err)
		}
		if err := fn(r.state()); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read every session's tail and owner: %w", err)
	}
	return nil
}

func (s *reopeningSQLite) Sessions(ctx context.Context, fn func(SessionState) error) error {
	_, err := reopenCall(ctx, s, func(c *sqliteStore) (struct{}, error) { return struct{}{}, c.Sessions(ctx, fn) })
	return err
}

func (d *deadlineStore) Sessions(ctx context.Context, fn func(SessionState) error) error {
	_, err := bounded(ctx, d, "Sessions", func(ctx context.Context) (struct{}, error) { return struct{}{}, d.s.Sessions(ctx, fn) })
	return err
}
