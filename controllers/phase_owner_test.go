package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestLogClaims(t *testing.T) {
	var c logClaims
	key := types.NamespacedName{Namespace: "team-a", Name: "s"}
	if c.has(key, "uid-1", "sid-1") {
		t.Fatal("a session with no claim recorded has one")
	}
	c.record(key, "uid-1", "sid-1")
	if !c.has(key, "uid-1", "sid-1") {
		t.Fatal("the claim just recorded is not there")
	}
	for _, o := range []struct {
		uid types.UID
		sid string
	}{{"uid-2", "sid-1"}, {"uid-1", "sid-2"}, {"uid-1sid", "-1"}} {
		if c.has(key, o.uid, o.sid) {
			t.Errorf("the claim of (uid-1, sid-1) is taken for (%s, %s)", o.uid, o.sid)
		}
	}
	c.forget(key)
	if c.has(key, "uid-1", "sid-1") {
		t.Fatal("a forgotten session still has its claim")
	}
}
