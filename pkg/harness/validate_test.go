package harness

import (
	"encoding/json"
	"testing"
)

func TestDecodePlanModeIsStrict(t *testing.T) {
	for _, bad := range []string{`{}`, `{"active":42}`, `{"active":"plan"}`, `{"active":true,"x":1}`, `[]`} {
		if _, err := DecodePlanMode(json.RawMessage(bad)); err == nil {
			t.Errorf("DecodePlanMode(%s) accepted", bad)
		}
	}
	if a, err := DecodePlanMode(json.RawMessage(`{"active":true}`)); err != nil || !a {
		t.Fatalf("valid payload: %v %v", a, err)
	}
}

func TestNegativeZero(t *testing.T) {
	for in, want := range map[string]int{
		`{"a":-0}`:             5,
		`[-0.000]`:             1,
		`[-0e5]`:               1,
		`[-0E-2]`:              1,
		`[0,-1,-0.5,-10,1e-0]`: -1,
		`["-0", "\"-0"]`:       -1,
		`{"k\"-0":1}`:          -1,
		`{"k\\":-0}`:           7,
		`{"k\\":1,"x":-0}`:     13,
		`[1.5e-0,-0]`:          8,
		`-0`:                   0,
	} {
		if got := negativeZero([]byte(in)); got != want {
			t.Errorf("negativeZero(%s) = %d, want %d", in, got, want)
		}
	}
}
