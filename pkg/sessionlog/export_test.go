package sessionlog

import "context"

// Hooks for the conformance tests in package sessionlog_test, which run the exported suite
// (sessionlogtest) and so cannot live in this package.

// PostgresDB returns the URL of a fresh database on the test binary's PostgreSQL server.
var PostgresDB = postgresDB

// tamperer is implemented by both backends for the corruption tests only.
type tamperer interface {
	corruptForTest(ctx context.Context, sessionID string, seq int64, data string) error
	deleteForTest(ctx context.Context, sessionID string, seq int64) error
}

// CorruptForTest overwrites a stored event's data without validation.
func CorruptForTest(ctx context.Context, s Store, sessionID string, seq int64, data string) error {
	return unwrapBackend(s).(tamperer).corruptForTest(ctx, sessionID, seq, data)
}

// DeleteForTest removes a stored event.
func DeleteForTest(ctx context.Context, s Store, sessionID string, seq int64) error {
	return unwrapBackend(s).(tamperer).deleteForTest(ctx, sessionID, seq)
}
