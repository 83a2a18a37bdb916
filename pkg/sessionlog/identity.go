package sessionlog

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// A store's identity is a random ID written into its own table (store_identity, one row) when
// the schema is created, and never changed after. A store that was replaced, dropped and
// recreated, or whose file was deleted and created anew has another ID; a restore of the same
// store's backup keeps it (and is told by its log ending before the position a reader
// recorded). The table is additive: binaries that predate it open the store unchanged.
//
// An open store checks it again whenever it reaches the store anew: the SQLite store on every
// reopen of its file (sqlite_reopen.go), the PostgreSQL store on every new connection
// (postgres.go). Either refuses, with a *StoreLostError, a store with another identity or none.
const (
	sqliteIdentitySchema   = `CREATE TABLE IF NOT EXISTS store_identity (id TEXT NOT NULL)`
	postgresIdentitySchema = `CREATE TABLE IF NOT EXISTS store_identity (id text NOT NULL)`
	identityInsert         = `INSERT INTO store_identity (id) SELECT %s WHERE NOT EXISTS (SELECT 1 FROM store_identity)`
	identitySelect         = `SELECT id FROM store_identity`
)

// newStoreID is a new store's identity: 128 random bits, hex.
func newStoreID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate a store identity: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// StoreLostError is a store that is no longer the one that was opened: its SQLite file was
// deleted or replaced by another store, or a new PostgreSQL connection found another database
// (dropped and recreated, another server). Nothing is written there: a store never creates
// what it did not have, so a process that keeps running on it cannot put its session on an
// empty log. It lasts until the store that was opened is back (a restored backup keeps its
// identity); to continue on the new store, restart the process and adopt it as
// docs/operations.md says. The manager reports it as LogStoreMismatch.
type StoreLostError struct {
	Store  string // the SQLite path, or the PostgreSQL URL redacted
	Opened string // the identity of the store that was opened
	Found  string // the identity found instead; "" when there is none
	Reason string // why there is none, when known
}

func (e *StoreLostError) Error() string {
	var what string
	switch {
	case e.Found != "":
		what = fmt.Sprintf("it now holds another store (identity %s)", e.Found)
	case e.Reason != "":
		what = e.Reason
	default:
		what = "its file was deleted"
	}
	return fmt.Sprintf("the session log store %s is no longer the store %s that was opened: %s; nothing is written to it. "+
		"Restore the store (a backup keeps its identity), or restart on the new store and adopt it (docs/operations.md, \"The log store was replaced\")",
		e.Store, e.Opened, what)
}

// IsStoreLost reports whether err is (or wraps) a *StoreLostError.
func IsStoreLost(err error) bool {
	var l *StoreLostError
	return errors.As(err, &l)
}
