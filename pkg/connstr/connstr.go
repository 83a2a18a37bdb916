// Package connstr hides the secrets of a session-log store's connection string before it is
// printed, logged or wrapped into an error. Every binary that takes a store (the manager, the
// agent, plancheck, planlog, kubectl plan) uses it, so a password never shows in one and not
// another. agents/dsh-plugin/src/connstr.ts is the same rule for the dsh plugin.
//
// It masks a secret where it stands, never its text elsewhere: a password "p" leaves "dial
// tcp" alone. It understands both forms PostgreSQL clients accept, as pgx and libpq read them:
//
//   - URLs (postgres://user:secret@host/db, multi-host postgres://u:secret@h1,h2/db): the
//     user-info password runs from the first ':' after "://" to the last '@' of the string,
//     so a password with an unescaped '/', '?', '#', '@' or space is still masked whole; and
//     the values of password and sslpassword query parameters (keys compared decoded, any case);
//   - key=value strings (host=db password='p w' sslpassword=x): a value quoted with single
//     quotes and backslash escapes, or unquoted up to the next space, a backslash escaping the
//     next character.
//
// A text that quotes connection strings (an error, a log line) is scanned for both; a URL in
// it ends at the next space or quote, so a connection string is redacted whole (Redact) before
// any parser sees it, and a parser's error about it is never printed raw (pkg/sessionlog).
package connstr

import (
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "xxxxx"

var (
	// The start of a URL: scheme://
	urlStart = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://`)
	// A secret key of a key=value string, at a word boundary, and its '=' (libpq allows blanks
	// around it). Group 1 is the key.
	secretKey = regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9_])(sslpassword|password)[ \t\n\r\v\f]*=[ \t\n\r\v\f]*`)
)

// span is the bytes [start, end) of one secret in a string, and its value as a client reads it.
type span struct {
	start, end int
	value      string
}

// Redact returns s with every secret masked. s is a connection string (a URL is one when s
// starts with scheme://, to its end) or a text quoting them (a key=value string is one).
func Redact(s string) string {
	return mask(s, spans(s, isURL(s)))
}

// Secrets returns the secrets of the connection string conn as a client reads them: the URL's
// user-info password percent-decoded, parameter values decoded or unquoted. A caller that parses
// conn checks its parser read the same (pkg/sessionlog), so that what Redact masks is what the
// client sends.
func Secrets(conn string) []string {
	sps := spans(conn, isURL(conn))
	out := make([]string, 0, len(sps))
	for _, sp := range sps {
		out = append(out, sp.value)
	}
	return out
}

// Error returns err with its message redacted: every occurrence of conn in it is replaced by
// Redact(conn), then anything Redact finds in the text is masked. The result still unwraps to
// err, so errors.Is and errors.As see the same chain; only its text changes. A nil err stays
// nil.
func Error(err error, conn string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if conn != "" {
		msg = strings.ReplaceAll(msg, conn, Redact(conn))
	}
	msg = mask(msg, spans(msg, false))
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

func isURL(s string) bool {
	loc := urlStart.FindStringIndex(s)
	return loc != nil && loc[0] == 0
}

func mask(s string, secrets []span) string {
	if len(secrets) == 0 {
		return s
	}
	var b strings.Builder
	at := 0
	for _, sp := range secrets {
		b.WriteString(s[at:sp.start])
		b.WriteString(Mask)
		at = sp.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// spans finds the secrets of s in order. whole: s is one URL connection string, to its end.
func spans(s string, whole bool) []span {
	if whole {
		return urlSpans(s, 0, len(s))
	}
	var out []span
	for i := 0; i < len(s); {
		u := urlStart.FindStringIndex(s[i:])
		k := secretKey.FindStringSubmatchIndex(s[i:])
		switch {
		case k != nil && (u == nil || i+k[2] <= i+u[0]):
			sp := kvValue(s, i+k[1])
			if sp.end > sp.start {
				out = append(out, sp)
			}
			i = max(sp.end, i+k[1])
		case u != nil:
			end := urlEnd(s, i+u[1])
			out = append(out, urlSpans(s, i+u[0], end)...)
			i = end
		default:
			return out
		}
	}
	return out
}

// urlEnd is where a URL that starts in a text ends: the next blank or quote, less a ':' or ','
// that ends a clause of the text ("open postgres://...: refused").
func urlEnd(s string, from int) int {
	end := len(s)
	if j := strings.IndexAny(s[from:], " \t\r\n\v\f\"'`<>"); j >= 0 {
		end = from + j
	}
	for end > from && (s[end-1] == ':' || s[end-1] == ',') {
		end--
	}
	return end
}

// urlSpans finds the secrets of the URL s[start:end].
func urlSpans(s string, start, end int) []span {
	var out []span
	rest := start + strings.Index(s[start:end], "://") + 3
	queryFrom := rest
	if at := strings.LastIndexByte(s[rest:end], '@'); at >= 0 {
		userinfo := s[rest : rest+at]
		if c := strings.IndexByte(userinfo, ':'); c >= 0 && c+1 < len(userinfo) {
			out = append(out, span{start: rest + c + 1, end: rest + at, value: uriDecode(userinfo[c+1:])})
		}
		queryFrom = rest + at + 1
	}
	q := strings.IndexByte(s[queryFrom:end], '?')
	if q < 0 {
		return out
	}
	qs := queryFrom + q + 1
	qe := end
	if h := strings.IndexByte(s[qs:end], '#'); h >= 0 {
		qe = qs + h
	}
	for p := qs; p <= qe; {
		amp := strings.IndexByte(s[p:qe], '&')
		pe := qe
		if amp >= 0 {
			pe = p + amp
		}
		if eq := strings.IndexByte(s[p:pe], '='); eq >= 0 {
			if isSecretKey(uriDecode(s[p:p+eq])) && p+eq+1 < pe {
				out = append(out, span{start: p + eq + 1, end: pe, value: uriDecode(s[p+eq+1 : pe])})
			}
		}
		p = pe + 1
	}
	return out
}

// uriDecode decodes a URL component as libpq and pgx do: %XX escapes, blanks at either end
// dropped, '+' kept.
func uriDecode(raw string) string {
	raw = strings.Trim(raw, " ")
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && i+2 < len(raw) {
			if hi, lo := unhex(raw[i+1]), unhex(raw[i+2]); hi >= 0 && lo >= 0 {
				b.WriteByte(byte(hi<<4 | lo))
				i += 2
				continue
			}
		}
		b.WriteByte(raw[i])
	}
	return b.String()
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func isSecretKey(k string) bool {
	return strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword")
}

// kvValue reads a key=value value starting at from, as pgx and libpq do: single-quoted with
// backslash escapes (unterminated: to the end), or unquoted to the next blank, a backslash
// escaping the next character. The span covers the quotes too.
func kvValue(s string, from int) span {
	var b strings.Builder
	i := from
	if i < len(s) && s[i] == '\'' {
		for i++; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
				continue
			}
			if s[i] == '\'' {
				return span{start: from, end: i + 1, value: b.String()}
			}
			b.WriteByte(s[i])
		}
		return span{start: from, end: len(s), value: b.String()}
	}
	for ; i < len(s) && !isBlank(s[i]); i++ {
		if s[i] == '\\' {
			if i+1 == len(s) {
				break // a trailing backslash ends the value, dropped
			}
			i++
		}
		b.WriteByte(s[i])
	}
	// A word after the value that is no key=value pair cannot be read by any client (pgx and
	// libpq refuse the string): it is most likely the rest of a password with a blank in it.
	end := i
	for end < len(s) {
		j := end
		for j < len(s) && isBlank(s[j]) {
			j++
		}
		k := j
		for k < len(s) && !isBlank(s[k]) && s[k] != '=' {
			k++
		}
		if k == j || (k < len(s) && s[k] == '=') {
			break
		}
		end = k
	}
	return span{start: from, end: end, value: b.String()}
}

func isBlank(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}
