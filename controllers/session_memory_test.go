package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestSessionMemoryClaims(t *testing.T) {
	var m sessionMemory
	key := types.NamespacedName{Namespace: "team-a", Name: "s"}
	if m.holdsClaim(key, "uid-1", "sid-1") {
		t.Fatal("a session with no claim recorded holds one")
	}
	m.wrote(key, statusDigest{1})
	if m.holdsClaim(key, "uid-1", "sid-1") {
		t.Fatal("a status write alone records a claim")
	}
	m.claimed(key, "uid-1", "sid-1")
	if !m.holdsClaim(key, "uid-1", "sid-1") {
		t.Fatal("the claim just recorded is not held")
	}
	for _, c := range []struct {
		uid types.UID
		sid string
	}{{"uid-2", "sid-1"}, {"uid-1", "sid-2"}, {"uid-1sid", "-1"}} {
		if m.holdsClaim(key, c.uid, c.sid) {
			t.Errorf("the claim of (uid-1, sid-1) is taken for (%s, %s)", c.uid, c.sid)
		}
	}
	if d, ok := m.heldDigest(key); !ok || d != (statusDigest{1}) {
		t.Error("recording the claim lost the written status digest")
	}
	m.forget(key)
	if m.holdsClaim(key, "uid-1", "sid-1") {
		t.Fatal("a forgotten session still holds its claim")
	}
}
