// Package connstr hides the secrets of a session-log store's connection string before it is
// printed, logged or wrapped into an error. Every binary that takes a store (the manager, the
// agent, plancheck, planlog, kubectl plan log) uses it, so a password never shows in one and
// not another.
//
// It understands both forms PostgreSQL clients accept: URLs (postgres://user:pass@host/db,
// and ?password= or ?sslpassword= in the query) and key=value strings
// (host=db user=u password='p w'). A SQLite URL has no secret and passes unchanged.
package connstr

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "xxxxx"

// secretKeys are the connection parameters that hold a secret (libpq's password and
// sslpassword; pgx reads the same names).
var secretKeys = `password|sslpassword`

var (
	// A key=value pair of a DSN, or a query parameter of a URL; a value is a quoted string
	// with backslash escapes, or runs to the next blank, '&' or quote.
	secretParam = regexp.MustCompile(`(?i)\b(` + secretKeys + `)(\s*=\s*)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s&'"]*)`)
	// The user-info password of any URL quoted in a text: scheme://user:secret@
	userinfoPassword = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*):[^@/\s]*@`)
)

// Redact returns s, a store URL or a key=value connection string, with every secret replaced
// by Mask: the URL's user-info password and any password or sslpassword parameter.
func Redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.Scheme != "" && strings.Contains(s, "://") {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
		if u.RawQuery != "" {
			u.RawQuery = secretParam.ReplaceAllString(u.RawQuery, "${1}${2}"+Mask)
		}
		return u.String()
	}
	return RedactText(s)
}

// RedactText removes secrets from free text that may quote connection strings (an error
// message of a driver, a log line): every user-info password of a URL and every password or
// sslpassword parameter.
func RedactText(msg string) string {
	msg = userinfoPassword.ReplaceAllString(msg, "${1}:"+Mask+"@")
	return secretParam.ReplaceAllString(msg, "${1}${2}"+Mask)
}

// Secrets returns the literal secrets conn carries, so a message that quotes one out of its
// context (a driver's "password authentication failed for ... s3cret") can be cleaned too.
func Secrets(conn string) []string {
	var out []string
	add := func(v string) {
		v = strings.Trim(v, `'"`)
		if v != "" {
			out = append(out, v)
		}
	}
	if u, err := url.Parse(conn); err == nil && strings.Contains(conn, "://") {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		for _, k := range []string{"password", "sslpassword"} {
			for key, vs := range u.Query() {
				if strings.EqualFold(key, k) {
					for _, v := range vs {
						add(v)
					}
				}
			}
		}
	}
	for _, m := range secretParam.FindAllStringSubmatch(conn, -1) {
		v := m[3]
		if uv, err := url.QueryUnescape(v); err == nil {
			add(uv)
		}
		add(v)
	}
	return out
}

// RedactFor removes from msg the secrets of conn (literally, wherever they appear) and then
// anything RedactText recognises.
func RedactFor(msg, conn string) string {
	for _, s := range Secrets(conn) {
		msg = strings.ReplaceAll(msg, s, Mask)
	}
	return RedactText(msg)
}

// Error returns err with its message cleaned of conn's secrets (RedactFor). The result still
// unwraps to err, so errors.Is and errors.As see the same chain; only its text changes. A nil
// err stays nil.
func Error(err error, conn string) error {
	if err == nil {
		return nil
	}
	msg := RedactFor(err.Error(), conn)
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
