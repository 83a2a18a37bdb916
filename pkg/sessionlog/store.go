// Package sessionlog reads and appends an agent's durable session log: the harness's event
// envelope {type, seq, time, data}, with compare-and-swap appends on the next seq, behind one
// small Store interface with SQLite and PostgreSQL backends chosen by URL.
package sessionlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Event is one session-log event in the harness envelope. Field order matches the harness's
// Session.append (type, seq, time, data, then the optional fields).
type Event struct {
	Type string `json:"type"`
	Seq  int64  `json:"seq"`
	// Time is Unix epoch milliseconds at append.
	Time int64           `json:"time"`
	Data json.RawMessage `json:"data"`
	// Ignorable marks an event a reader may skip when it does not know its type.
	Ignorable bool `json:"ignorable,omitempty"`
	// SourceEventSeqs and SurfaceOp appear only on surface events (user/message,
	// assistant/message, tool/result); kept verbatim.
	SourceEventSeqs []int64         `json:"sourceEventSeqs,omitempty"`
	SurfaceOp       json.RawMessage `json:"surfaceOp,omitempty"`
}

// Tail is the log state plan mode needs, maintained incrementally on every append so that
// reading it costs the same for a log of 10 events and of 1,000,000.
type Tail struct {
	// NextSeq is the seq the next appended event must carry (the log length).
	NextSeq int64
	// Active is the committed plan state: the last plan/mode, false when there is none.
	Active bool
	// LastPlanModeSeq is the seq of the last plan/mode, -1 when there is none.
	LastPlanModeSeq int64
	// Told is the plan state in force at the last request/header; nil when there is none.
	Told *bool
	// TurnOpen is true when the last turn/start has no turn/end after it.
	TurnOpen bool
	// Turn is the number of the last turn/start (0 when none).
	Turn int64
	// LastStepStartSeq is the seq of the last step/start, -1 when there is none.
	LastStepStartSeq int64
	// Step is the step number of the last step/start in the open turn (0 when none).
	Step int64
	// StepOpen is true when the last step/start has no step/end after it.
	StepOpen bool
}

// SessionInfo is the session header (the first line of the harness's JSONL file).
type SessionInfo struct {
	ID            string `json:"id"`
	CreatedAt     int64  `json:"createdAt"`
	ParentSession string `json:"parentSession,omitempty"`
	SeedLength    int64  `json:"seedLength,omitempty"`
}

// Store is a session-log backend. Implementations: SQLite (embedded default) and PostgreSQL.
type Store interface {
	// Append writes events atomically. It succeeds only if events[0].Seq equals the stored
	// next seq and the seqs are contiguous; otherwise it returns a *ConflictError and writes
	// nothing. Payloads are validated (plan/mode must be exactly {active: bool}) before anything
	// is written. Time is filled in when zero. It returns the new tail.
	Append(ctx context.Context, sessionID string, events []Event) (Tail, error)
	// Tail returns the tail state without reading the log. An unknown session has a zero Tail
	// (NextSeq 0, LastPlanModeSeq -1, LastStepStartSeq -1).
	Tail(ctx context.Context, sessionID string) (Tail, error)
	// ReadFrom returns the events with seq >= fromSeq, at most limit of them (limit <= 0: all).
	ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]Event, error)
	// Fork seeds an empty session dstID with srcID's events 0..throughSeq inclusive; the prefix
	// must not end inside an open turn. throughSeq < 0 means through the last turn/end.
	Fork(ctx context.Context, srcID, dstID string, throughSeq int64) (Tail, error)
	// Info returns the session header; ErrNotFound (wrapped) for a session never written.
	Info(ctx context.Context, sessionID string) (SessionInfo, error)
	// Seed creates session info.ID with its header (createdAt, parentSession, seedLength) and
	// its first events (seq 0 onward, possibly none) atomically; a session that already exists
	// is refused with a *ConflictError. Fork and JSONL import are built on it.
	Seed(ctx context.Context, info SessionInfo, events []Event) (Tail, error)
	// Close releases the backend.
	Close() error
}

// ConflictError is returned by Append when the batch does not start at the stored next seq:
// a stale or duplicate writer is refused, never merged.
type ConflictError struct {
	SessionID string
	Expected  int64 // the stored next seq
	Got       int64 // the first seq of the refused batch
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("append to session %q: seq conflict: batch starts at %d, stored next seq is %d", e.SessionID, e.Got, e.Expected)
}

// IsConflict reports whether err is (or wraps) a *ConflictError.
func IsConflict(err error) bool {
	var c *ConflictError
	return errors.As(err, &c)
}
