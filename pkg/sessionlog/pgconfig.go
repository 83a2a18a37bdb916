package sessionlog

import (
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/harness-dev/planmode-operator/pkg/connstr"
)

// ConnStringError is a PostgreSQL connection string that cannot be used. Store is the string
// redacted (connstr.Redact); Reason never quotes the string itself.
type ConnStringError struct {
	Store  string
	Reason string
}

func (e *ConnStringError) Error() string {
	return fmt.Sprintf("postgres session log %s: %s", e.Store, e.Reason)
}

// percentEncodeHint is the fix for a password whose characters break the URL.
const percentEncodeHint = "percent-encode the password's special characters in the URL " +
	"(%2F for /, %40 for @, %3A for :, %3F for ?, %23 for #, %25 for %, %20 for a space)"

// parsePostgres parses url as pgx does. A parser's error about a connection string may quote
// parts of it that it could not tell apart from a password, so it is never shown: the reason
// given is the error of parsing the redacted string, which holds no secret, or, when that
// parses, a password that breaks the URL. A string whose password pgx reads other than
// connstr masks it (a raw '@' or '/' in it) is refused too: an error about the fields pgx read
// instead (the database, the port) would show the rest of it.
func parsePostgres(url string) (*pgxpool.Config, error) {
	shown := connstr.Redact(url)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		reason := "the connection string does not parse: " + percentEncodeHint
		if _, rerr := pgxpool.ParseConfig(shown); rerr != nil {
			reason = "the connection string does not parse: " + rerr.Error()
		}
		return nil, &ConnStringError{Store: shown, Reason: reason}
	}
	if secrets := connstr.Secrets(url); len(secrets) > 0 && !slices.Contains(secrets, cfg.ConnConfig.Password) {
		return nil, &ConnStringError{Store: shown, Reason: "the password is ambiguous: " + percentEncodeHint}
	}
	return cfg, nil
}
