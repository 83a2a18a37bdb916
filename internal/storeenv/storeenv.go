// Package storeenv resolves the session-log store URL from the environment, the same way in
// every binary.
package storeenv

import "os"

// Name is the environment variable every binary reads the store URL from. An environment
// variable keeps a PostgreSQL password out of shell history and process listings.
const Name = "PLANMODE_LOG_STORE"

// Lookup returns the store URL the environment names, "" when it names none.
func Lookup() string { return os.Getenv(Name) }
