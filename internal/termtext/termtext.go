// Package termtext makes text an agent (or a model) wrote safe to print on a terminal. A plan
// holding a carriage return, an ANSI escape (ESC[2K erases a line) or an OSC sequence (OSC 52
// writes the clipboard) would let the text on the reviewer's screen differ from the text they
// approve; bidirectional-override characters reorder what is shown. Every kubectl plan output of
// agent-written text goes through Text or Line, and the admission webhook refuses the same
// control characters in a posted plan (FirstControl).
package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// isControl: C0 controls, DEL and C1 controls (the Unicode Cc category).
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f
}

// isBidi: the bidirectional embedding, override and isolate controls and the directional marks,
// which change the order in which a terminal shows the text around them.
func isBidi(r rune) bool {
	return r == 0x200e || r == 0x200f || r == 0x061c || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// FirstControl returns the byte offset and the rune of the first control character in s other
// than newline and tab, or -1. It is the check the webhook applies to a posted plan.
func FirstControl(s string) (offset int, r rune) {
	for i, c := range s {
		if c != '\n' && c != '\t' && isControl(c) {
			return i, c
		}
	}
	return -1, 0
}

// Name describes a control rune for messages: "U+001B (ESC)".
func Name(r rune) string {
	names := map[rune]string{0: "NUL", 0x07: "BEL", 0x08: "BS", 0x0b: "VT", 0x0c: "FF", 0x0d: "CR", 0x1b: "ESC", 0x7f: "DEL", 0x9b: "CSI", 0x9d: "OSC"}
	if n, ok := names[r]; ok {
		return fmt.Sprintf("U+%04X (%s)", r, n)
	}
	return fmt.Sprintf("U+%04X", r)
}

// Text escapes s for a terminal, keeping its lines: newlines and tabs stay, every other control
// character, bidirectional control and invalid UTF-8 byte is shown as a visible escape
// (\x1b, \u202e, \xff), so what the terminal shows is the text byte for byte.
func Text(s string) string { return escape(s, true) }

// Line escapes s for one line of output (a table cell, a summary): as Text, and newlines and
// tabs are shown as \n and \t too.
func Line(s string) string { return escape(s, false) }

func escape(s string, multiline bool) string {
	if clean(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case multiline && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case isControl(r) && r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case isControl(r), isBidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func clean(s string, multiline bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == 0x7f || c < 0x20 && (!multiline || c != '\n' && c != '\t') {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || isControl(r) || isBidi(r) {
			return false
		}
		i += size
	}
	return true
}
