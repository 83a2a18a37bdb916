package steerid_test

import (
	"sort"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/steerid"
)

func TestOrder(t *testing.T) {
	ordered := []string{"1", "9", "10", "a", "kp-2", "kp-10", "kp-10-1", "kp-10a", "kp-1733000000000000000", "kp-f81d", "m01", "m1", "m2", "m10", "m10.1", "plan-5"}
	shuffled := append([]string(nil), ordered...)
	sort.Slice(shuffled, func(i, j int) bool { return shuffled[i] > shuffled[j] })
	sort.SliceStable(shuffled, func(i, j int) bool { return steerid.Compare(shuffled[i], shuffled[j]) < 0 })
	for i := range ordered {
		if shuffled[i] != ordered[i] {
			t.Fatalf("sorted = %q, want %q", shuffled, ordered)
		}
	}
	for i := range ordered {
		if steerid.Compare(ordered[i], ordered[i]) != 0 {
			t.Errorf("Compare(%q, itself) != 0", ordered[i])
		}
		for j := i + 1; j < len(ordered); j++ {
			if !steerid.After(ordered[j], ordered[i]) || steerid.After(ordered[i], ordered[j]) {
				t.Errorf("%q and %q are not ordered", ordered[i], ordered[j])
			}
		}
	}
	if got := steerid.Max("m2", "", "m10", "m9"); got != "m10" {
		t.Errorf("Max = %q", got)
	}
}

func TestNextComesAfterTheLast(t *testing.T) {
	now := time.Unix(1733000000, 0)
	for _, last := range []string{"", "m1", "kp-" + "1733000000000000000", "kp-9999999999999999999", "kp-f81d4fae-7dec", "plan-x", "kp-99"} {
		id := steerid.Next("kp-", last, now)
		if last != "" && !steerid.After(id, last) {
			t.Errorf("Next(%q) = %q, not after it", last, id)
		}
	}
	if got := steerid.Next("kp-", "kp-9999999999999999999", now); got != "kp-10000000000000000000" {
		t.Errorf("Next after a later clock's id = %q", got)
	}
	if got := steerid.Next("kp-", "plan-x", now); got != "plan-x-1" {
		t.Errorf("Next after an id without a number = %q", got)
	}
}
