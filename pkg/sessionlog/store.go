// Package sessionlog stores an agent's durable session log: events in the harness's envelope
// (pkg/harness), appended with compare-and-swap on the next seq, behind one small Store
// interface with SQLite and PostgreSQL backends chosen by URL, and exported to or imported
// from the harness's JSONL format.
package sessionlog

import (
	"context"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// SessionInfo is the session header (the first line of the harness's JSONL file).
type SessionInfo struct {
	ID            string `json:"id"`
	CreatedAt     int64  `json:"createdAt"`
	ParentSession string `json:"parentSession,omitempty"`
	SeedLength    int64  `json:"seedLength,omitempty"`
	// The harness's own header fields (header.go): the project directory the harness files
	// the session under, "subagent" for a delegated child's session, the agent preset and
	// the delegation depth.
	Cwd             string `json:"cwd,omitempty"`
	Origin          string `json:"origin,omitempty"`
	AgentPreset     string `json:"agentPreset,omitempty"`
	DelegationDepth int64  `json:"delegationDepth,omitempty"`
}

// Store is a session-log backend. Implementations: SQLite (embedded default) and PostgreSQL.
// Each keeps the session's harness.Tail beside its events, folded with harness.Tail.Apply in
// the append transaction.
type Store interface {
	// Append writes events atomically. It succeeds only if events[0].Seq equals the stored
	// next seq and the seqs are contiguous; otherwise it returns a *ConflictError and writes
	// nothing. Events are validated (harness.Check: plan/mode must be exactly {active: bool})
	// before anything is written. Time is filled in when zero. It returns the new tail.
	Append(ctx context.Context, sessionID string, events []harness.Event) (harness.Tail, error)
	// Tail returns the tail state without reading the log. An unknown session has
	// harness.EmptyTail (NextSeq 0, LastPlanModeSeq -1, LastStepStartSeq -1).
	Tail(ctx context.Context, sessionID string) (harness.Tail, error)
	// ReadFrom returns the events with seq >= fromSeq, at most limit of them (limit <= 0: all).
	ReadFrom(ctx context.Context, sessionID string, fromSeq int64, limit int) ([]harness.Event, error)
	// Fork seeds an empty session dstID with srcID's events 0..throughSeq inclusive, for the
	// AgentSession owner; the prefix must not end inside an open turn. throughSeq < 0 means
	// through the last turn/end. In the seeding transaction srcID's log must be owned by a
	// session of owner's namespace, and dstID's by none or owner, who is recorded as its owner
	// (owner.go); else an *OwnershipError and nothing written.
	Fork(ctx context.Context, srcID, dstID string, throughSeq int64, owner Owner) (harness.Tail, error)
	// Info returns the session header; ErrNotFound (wrapped) for a session never written.
	Info(ctx context.Context, sessionID string) (SessionInfo, error)
	// Seed creates session info.ID with its header (createdAt, parentSession, seedLength) and
	// its first events (seq 0 onward, possibly none) atomically, and records owner as its
	// owner (the zero Owner: none); a session that already exists is refused with a
	// *ConflictError, one another session owns (or any owner, for the zero Owner) with an
	// *OwnershipError. JSONL import is built on it.
	Seed(ctx context.Context, info SessionInfo, events []harness.Event, owner Owner) (harness.Tail, error)
	// ClaimOwner records owner as the AgentSession the log of sessionID belongs to when it has
	// none (or re-records the UID when the same namespace/name claims it again), and returns
	// the owner that holds the log: owner itself, or an earlier one. It never touches the log.
	ClaimOwner(ctx context.Context, sessionID string, owner Owner) (Owner, error)
	// ClaimOwners is ClaimOwner for many logs, in a few transactions (each of at most a
	// thousand claims) rather than one per log: held[i] is the owner that holds the log of
	// claims[i]. A manager that starts claims every new session's log with it at once.
	ClaimOwners(ctx context.Context, claims []OwnerClaim) (held []Owner, err error)
	// OwnerOf returns the owner of sessionID's log; false when it has none.
	OwnerOf(ctx context.Context, sessionID string) (Owner, bool, error)
	// Sessions calls fn once for every session the store holds a log or an owner record of,
	// all as of one read, and stops at fn's first error, which it returns. A manager that
	// starts reads it once instead of every session's tail and owner record apart.
	Sessions(ctx context.Context, fn func(SessionState) error) error
	// ReleaseOwner removes the record that holder (by namespace and name) owns sessionID's
	// log, so another AgentSession may claim it; the log itself stays. A record naming
	// another owner is kept (*OwnershipError, RefusedNotTheOwner).
	ReleaseOwner(ctx context.Context, sessionID string, holder Owner) error
	// Identity returns the store's ID, created with its schema (identity.go): a replaced,
	// recreated or deleted-and-created store has another. It also tells whether the store
	// answers: SQLite reads it through its writer, after checking the file is still the one
	// it opened (sqlite.go).
	Identity(ctx context.Context) (string, error)
	// Close releases the backend.
	Close() error
}

// nowMillis is the harness's Date.now(): the time a store gives an event appended with none.
func nowMillis() int64 { return time.Now().UnixMilli() }

// newHeader is the header a write that creates a session stores: info when given (a fork or an
// import), else a new one, with the creation time filled in. parent is the parent column's
// value: NULL for a session with no parent.
func newHeader(sessionID string, info *SessionInfo) (hdr SessionInfo, parent any) {
	hdr = SessionInfo{ID: sessionID}
	if info != nil {
		hdr = *info
	}
	if hdr.CreatedAt == 0 {
		hdr.CreatedAt = nowMillis()
	}
	if hdr.ParentSession != "" {
		parent = hdr.ParentSession
	}
	return hdr, parent
}
