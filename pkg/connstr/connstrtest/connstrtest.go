// Package connstrtest builds connection strings around a password in every form a PostgreSQL
// client reads, for tests that check no binary shows any part of it (pkg/connstr's fuzz
// target, pkg/sessionlog's, and the binaries' own tests).
package connstrtest

import (
	"net/url"
	"strings"
)

// Head and Tail mark a test password: Password(core) starts with Head and ends with Tail, so
// any part of it that reaches an output (a leak cut at a character the parser stopped at)
// shows one of them. Neither occurs in any binary's own text.
const (
	Head = "Kq7"
	Tail = "7Jx"
)

// Password is the test password around core.
func Password(core string) string { return Head + core + Tail }

// Leaks reports whether out shows any part of a Password.
func Leaks(out string) bool { return strings.Contains(out, Head) || strings.Contains(out, Tail) }

// Form is one way to write a connection string around a password.
type Form struct {
	Name string
	// Build returns the connection string to 127.0.0.1 port 1 (nothing listens there).
	Build func(password string) string
}

// Forms are the URL with the password raw (unescaped odd characters make it malformed),
// percent-encoded, in the query, with several hosts; key=value quoted and unquoted, with
// several hosts.
var Forms = []Form{
	{"url-raw", func(pw string) string { return "postgres://planmode:" + pw + "@127.0.0.1:1/log?sslmode=disable" }},
	{"url-escaped", func(pw string) string {
		u := url.URL{Scheme: "postgres", User: url.UserPassword("planmode", pw), Host: "127.0.0.1:1", Path: "/log", RawQuery: "sslmode=disable"}
		return u.String()
	}},
	{"url-query", func(pw string) string {
		return "postgres://planmode@127.0.0.1:1/log?sslmode=disable&password=" + url.QueryEscape(pw)
	}},
	{"url-multihost", func(pw string) string {
		return "postgres://planmode:" + pw + "@127.0.0.1:1,127.0.0.1:2/log?sslmode=disable"
	}},
	{"kv-quoted", func(pw string) string {
		return "host=127.0.0.1 port=1 user=planmode password='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "' dbname=log sslmode=disable"
	}},
	{"kv-bare", func(pw string) string {
		var b strings.Builder
		for i := 0; i < len(pw); i++ {
			if strings.IndexByte(" \t\n\r\v\f'\\", pw[i]) >= 0 {
				b.WriteByte('\\')
			}
			b.WriteByte(pw[i])
		}
		return "host=127.0.0.1,127.0.0.2 port=1,1 user=planmode password=" + b.String() + " dbname=log sslmode=disable"
	}},
}

// Cores are passwords (without Head and Tail) that break parsers: the characters a URL does not
// allow unescaped, quotes, escapes, a parameter separator, words of the surrounding text.
var Cores = []string{"s3cret", "p@ss", "a/b c", "x?y#z", `q'u\o"te`, "%zz%41", "a&password=b", " lead", "u:v@w", `\`, "postgres", "p", "dial tcp"}
