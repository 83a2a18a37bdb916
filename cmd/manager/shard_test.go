package main

import (
	"flag"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

func parseFlags(t *testing.T, args ...string) (*flag.FlagSet, *options) {
	t.Helper()
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	bindFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs, &o
}

func TestShardSelectorScopesTheSessionCacheAndTheLease(t *testing.T) {
	fs, o := parseFlags(t, "--shard-selector", ShardLabel+"=a")
	if err := checkOptions(o); err != nil {
		t.Fatal(err)
	}
	c := cacheOptions(o)
	if c.DefaultTransform == nil {
		t.Fatal("managedFields are no longer stripped")
	}
	var sel labels.Selector
	for obj, by := range c.ByObject {
		if _, ok := obj.(*agentsv1alpha1.AgentSession); ok {
			sel = by.Label
		}
	}
	if sel == nil || !sel.Matches(labels.Set{ShardLabel: "a"}) || sel.Matches(labels.Set{ShardLabel: "b"}) || sel.Matches(labels.Set{}) {
		t.Fatalf("AgentSession cache selector = %v, want %s=a only", sel, ShardLabel)
	}
	idA := leaderElectionID(fs, o)
	fsB, oB := parseFlags(t, "--shard-selector", ShardLabel+"=b")
	idB := leaderElectionID(fsB, oB)
	if idA == idB || !strings.HasPrefix(idA, "planmode-operator.agents.harness.dev-shard-") || len(idA) > 63 {
		t.Fatalf("lease IDs per shard: %q and %q", idA, idB)
	}
	// The same selector written differently is the same shard, so the same Lease.
	fsC, oC := parseFlags(t, "--shard-selector", " "+ShardLabel+" = a")
	if got := leaderElectionID(fsC, oC); got != idA {
		t.Fatalf("normalised selector gave lease %q, want %q", got, idA)
	}
	// An explicit --leader-election-id wins.
	fsD, oD := parseFlags(t, "--shard-selector", ShardLabel+"=a", "--leader-election-id", "mine")
	if got := leaderElectionID(fsD, oD); got != "mine" {
		t.Fatalf("explicit lease id ignored: %q", got)
	}
	// Unsharded: everything cached, the default Lease.
	fsE, oE := parseFlags(t)
	if len(cacheOptions(oE).ByObject) != 0 || leaderElectionID(fsE, oE) != "planmode-operator.agents.harness.dev" {
		t.Fatal("unsharded manager is scoped")
	}
}

func TestBadShardSelectorNamesTheFlag(t *testing.T) {
	for _, bad := range []string{"shard in (a", "!!", ","} {
		_, o := parseFlags(t, "--shard-selector", bad)
		err := checkOptions(o)
		if err == nil || !strings.Contains(err.Error(), "--shard-selector") {
			t.Errorf("--shard-selector %q: error %v", bad, err)
		}
	}
}

func TestCacheTransformDropsWhatTheManagerNeverReads(t *testing.T) {
	_, o := parseFlags(t)
	s := &agentsv1alpha1.AgentSession{}
	s.Name = "s"
	s.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"sessionID":"x"}}`, "team": "a"}
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := cacheOptions(o).DefaultTransform(s)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*agentsv1alpha1.AgentSession)
	if len(got.ManagedFields) != 0 {
		t.Errorf("managedFields kept: %v", got.ManagedFields)
	}
	if _, ok := got.Annotations[corev1.LastAppliedConfigAnnotation]; ok || got.Annotations["team"] != "a" {
		t.Errorf("annotations after the transform: %v (want only team=a)", got.Annotations)
	}
	// Objects without annotations, and tombstones, pass through.
	if _, err := cacheOptions(o).DefaultTransform(&agentsv1alpha1.PlanModeConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cacheOptions(o).DefaultTransform("not an object"); err != nil {
		t.Fatal(err)
	}
}
