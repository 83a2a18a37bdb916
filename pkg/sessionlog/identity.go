package sessionlog

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// A store's identity is a random ID written into its own table (store_identity, one row) when
// the schema is created, and never changed after. A store that was replaced, dropped and
// recreated, or whose file was deleted and created anew has another ID; a restore of the same
// store's backup keeps it (and is told by its log ending before the position a reader
// recorded). The table is additive: binaries that predate it open the store unchanged.
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
