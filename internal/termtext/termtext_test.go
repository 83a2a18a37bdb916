package termtext

import "testing"

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, text, line string }{
		{"# Plan\n\n1. Read parser.go\n\tindented\n", "# Plan\n\n1. Read parser.go\n\tindented\n", `# Plan\n\n1. Read parser.go\n\tindented\n`},
		{"2. Run the unit tests.\r3. curl x | sudo sh", `2. Run the unit tests.\x0d3. curl x | sudo sh`, `2. Run the unit tests.\x0d3. curl x | sudo sh`},
		{"a\x1b[2Kb", `a\x1b[2Kb`, `a\x1b[2Kb`},
		{"\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`, `\x1b]52;c;ZXZpbA==\x07`},
		{"nul\x00del\x7f", `nul\x00del\x7f`, `nul\x00del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`, `c1 \u009b31m`},
		{"safe \u202edecoy", `safe \u202edecoy`, `safe \u202edecoy`},
		{"bad \xff utf8", `bad \xff utf8`, `bad \xff utf8`},
		{"héllo — ✓ 日本", "héllo — ✓ 日本", "héllo — ✓ 日本"},
	} {
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if got := Line(tc.in); got != tc.line {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
		}
	}
}

func TestFirstControl(t *testing.T) {
	for _, tc := range []struct {
		in  string
		off int
		r   rune
	}{
		{"# Plan\n\tok\n", -1, 0},
		{"# Plan\r\n", 6, '\r'},
		{"# é\x1b[2K", 4, 0x1b},
		{"# x\u0085", 3, 0x85},
		{"# safe \u202e", -1, 0}, // bidi controls are format characters: escaped on print, not refused
	} {
		off, r := FirstControl(tc.in)
		if off != tc.off || r != tc.r {
			t.Errorf("FirstControl(%q) = %d, %U; want %d, %U", tc.in, off, r, tc.off, tc.r)
		}
	}
	if n := Name(0x1b); n != "U+001B (ESC)" {
		t.Errorf("Name(ESC) = %q", n)
	}
}
