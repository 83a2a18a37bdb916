package main

import "testing"

func TestUnwrap(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"one line", "one line"},
		{"a wrapped\nsentence goes on.", "a wrapped sentence goes on."},
		{"first paragraph\nwrapped.\n\nsecond one.", "first paragraph wrapped.\n\nsecond one."},
		{"States:\n- On: plan mode\n- Off: normal\nend of item", "States:\n- On: plan mode\n- Off: normal end of item"},
		{"Example:\n  kubectl plan on demo\n  kubectl plan off demo", "Example:\n  kubectl plan on demo\n  kubectl plan off demo"},
	} {
		if got := Unwrap(c.in); got != c.want {
			t.Errorf("Unwrap(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
