package sessionlog

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned (wrapped) by Info for a session that has no header.
var ErrNotFound = errors.New("session not found")

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

// ValidationError is returned by Append (and Seed) when an event of the batch is malformed;
// nothing of the batch is written. Field is a JSON path inside the event ("data.active").
type ValidationError struct {
	SessionID string
	Seq       int64
	Type      string
	Field     string
	Message   string
}

func (e *ValidationError) Error() string {
	where := fmt.Sprintf("session %q seq %d", e.SessionID, e.Seq)
	if e.Type != "" {
		where += " (" + e.Type + ")"
	}
	if e.Field != "" {
		where += " field " + e.Field
	}
	return "invalid event: " + where + ": " + e.Message
}

// IsInvalid reports whether err is (or wraps) a *ValidationError.
func IsInvalid(err error) bool {
	var v *ValidationError
	return errors.As(err, &v)
}

// CorruptError reports a stored event that cannot be read back as a valid event (bad JSON,
// an invalid typed payload, a missing seq). Reads never skip such a row.
type CorruptError struct {
	SessionID string
	Seq       int64
	Reason    string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("session %q seq %d: stored event is corrupt: %s", e.SessionID, e.Seq, e.Reason)
}

// IsCorrupt reports whether err is (or wraps) a *CorruptError.
func IsCorrupt(err error) bool {
	var c *CorruptError
	return errors.As(err, &c)
}
