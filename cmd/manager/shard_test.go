package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"testing"
	"unsafe"

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

// decodeSession decodes like the informer does: every string is a fresh copy.
func decodeSession(t *testing.T, doc string) *agentsv1alpha1.AgentSession {
	t.Helper()
	var s agentsv1alpha1.AgentSession
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

func TestCacheTransformSharesStringsThatRepeatAcrossSessions(t *testing.T) {
	_, o := parseFlags(t)
	doc := func(name string) string {
		return `{"apiVersion":"agents.harness.dev/v1alpha1","kind":"AgentSession",
		"metadata":{"name":"` + name + `","namespace":"team-a","labels":{"planmode.harness.dev/shard":"a"}},
		"spec":{"sessionID":"` + name + `","planMode":{"configRef":{"name":"default"}}},
		"status":{"planMode":{"config":{"name":"default","sectionSHA256":"a8f1e11ffea37a9a"},
		"storeID":"e461fc97411c90ad3a11103f425c069d",
		"notice":{"seq":3,"text":"The user switched this session back to the default mode."},
		"lastBoundary":{"turn":1,"step":2,"seq":5,"result":"Dismissed","active":false,"nextSeq":5,"reason":"Superseded","time":"2026-11-30T09:00:00Z"},
		"changes":[{"seq":3,"active":false,"cause":"Selection","by":{"username":"alice","uid":"u-1","groups":["system:authenticated"]}}]},
		"conditions":[{"type":"Ready","status":"True","reason":"InSync","message":"","lastTransitionTime":"2026-11-30T09:00:00Z"}]}}`
	}
	names := []string{"s-1", "s-2"}
	got := make([]*agentsv1alpha1.AgentSession, 0, len(names))
	for _, name := range names {
		out, err := cacheOptions(o).DefaultTransform(decodeSession(t, doc(name)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.(*agentsv1alpha1.AgentSession))
	}
	a, b := got[0], got[1]
	shared := map[string][2]string{
		"namespace":         {a.Namespace, b.Namespace},
		"kind":              {a.Kind, b.Kind},
		"configRef":         {a.Spec.PlanMode.ConfigRef.Name, b.Spec.PlanMode.ConfigRef.Name},
		"config digest":     {a.Status.PlanMode.Config.SectionSHA256, b.Status.PlanMode.Config.SectionSHA256},
		"notice":            {a.Status.PlanMode.Notice.Text, b.Status.PlanMode.Notice.Text},
		"condition message": {a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
		"store identity":    {a.Status.PlanMode.StoreID, b.Status.PlanMode.StoreID},
		"boundary reason":   {a.Status.PlanMode.LastBoundary.Reason, b.Status.PlanMode.LastBoundary.Reason},
		"change cause":      {string(a.Status.PlanMode.Changes[0].Cause), string(b.Status.PlanMode.Changes[0].Cause)},
		"change by":         {a.Status.PlanMode.Changes[0].By.Username, b.Status.PlanMode.Changes[0].By.Username},
		"change by uid":     {a.Status.PlanMode.Changes[0].By.UID, b.Status.PlanMode.Changes[0].By.UID},
		"change by group":   {a.Status.PlanMode.Changes[0].By.Groups[0], b.Status.PlanMode.Changes[0].By.Groups[0]},
		"shard label value": {a.Labels["planmode.harness.dev/shard"], b.Labels["planmode.harness.dev/shard"]},
	}
	for what, p := range shared {
		if p[0] != p[1] || unsafe.StringData(p[0]) != unsafe.StringData(p[1]) {
			t.Errorf("%s: %q and %q are two copies, want one shared", what, p[0], p[1])
		}
	}
	// What identifies a session stays its own (and intact).
	if a.Name != "s-1" || b.Name != "s-2" || a.Spec.SessionID != "s-1" || b.Spec.SessionID != "s-2" {
		t.Errorf("names after the transform: %q %q, sessionIDs %q %q", a.Name, b.Name, a.Spec.SessionID, b.Spec.SessionID)
	}
}

func TestInternTableIsBounded(t *testing.T) {
	in := &interner{m: map[string]string{}}
	for i := 0; i < internMaxEntries+100; i++ {
		s := fmt.Sprintf("message %d", i)
		in.intern(&s)
	}
	long := strings.Repeat("x", internMaxLen+1)
	in.intern(&long)
	if len(in.m) != internMaxEntries {
		t.Errorf("table holds %d strings, want at most %d", len(in.m), internMaxEntries)
	}
}
