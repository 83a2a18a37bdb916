// Package steerid orders the ids of a session's user messages (spec.steerQueue), so that an id
// is used once for the session's life with nothing remembered but the last one
// (docs/protocol.md, section 10): each message a writer adds takes an id after every id the
// session has used, and the last used is the queue's last entry or, once the queue has been
// emptied, status.agent.steerID (the last delivered). An id at or before that is refused by
// the admission webhook; kubectl plan and the dsh plugin choose ids with Next. The dsh plugin
// has the same order in agents/dsh-plugin/src/command.ts.
package steerid

import (
	"strconv"
	"strings"
	"time"
)

// Compare orders two ids: split into runs of digits and runs of other characters, runs are
// compared in turn, digit runs by their number (so m9 < m10), other runs byte by byte, and a
// digit run before any other run; an id that is a prefix of the other comes first. Ids equal in
// that order (m01, m1) compare byte by byte.
func Compare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ra, da := run(a, i)
		rb, db := run(b, j)
		switch {
		case da && !db:
			return -1
		case !da && db:
			return 1
		case da:
			if c := compareNumbers(a[i:ra], b[j:rb]); c != 0 {
				return c
			}
		default:
			if c := strings.Compare(a[i:ra], b[j:rb]); c != 0 {
				return c
			}
		}
		i, j = ra, rb
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	return strings.Compare(a, b)
}

// After reports whether a comes after b (Compare(a, b) > 0).
func After(a, b string) bool { return Compare(a, b) > 0 }

// Max is the last of ids in the order; "" for none.
func Max(ids ...string) string {
	m := ""
	for _, id := range ids {
		if id != "" && (m == "" || After(id, m)) {
			m = id
		}
	}
	return m
}

// Next is a new id for a message after last (the session's last used id, "" for none): prefix
// and the time in nanoseconds when that comes after last (a writer whose clock is behind
// another's does not), else last with its final number raised by one, or "-1" appended.
func Next(prefix, last string, now time.Time) string {
	id := prefix + strconv.FormatInt(now.UnixNano(), 10)
	if last == "" || After(id, last) {
		return id
	}
	k := len(last)
	for k > 0 && isDigit(last[k-1]) {
		k--
	}
	if k == len(last) {
		return last + "-1"
	}
	return last[:k] + increment(last[k:])
}

// run returns the end of the run starting at i and whether it is digits.
func run(s string, i int) (int, bool) {
	d := isDigit(s[i])
	j := i + 1
	for j < len(s) && isDigit(s[j]) == d {
		j++
	}
	return j, d
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// compareNumbers compares two digit strings by value.
func compareNumbers(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// increment adds one to a digit string, keeping its width when it can.
func increment(d string) string {
	b := []byte(d)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}
