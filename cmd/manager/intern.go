package main

import (
	"sync"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Strings that repeat across sessions (namespace, kind, condition reasons and messages, the
// config's name and section digest, the log store's identity, notice texts, who made the
// changes, label keys and values) are decoded into a fresh copy per object. The cache
// transform points them at one shared copy: a few hundred bytes less live heap per session,
// which the GC doubles.
const (
	internMaxLen     = 512  // longer strings are not worth a map lookup
	internMaxEntries = 4096 // bounds the table; later distinct strings are kept as they are
)

type interner struct {
	mu sync.Mutex
	m  map[string]string
}

var cacheStrings = &interner{m: map[string]string{}}

func (in *interner) intern(s *string) {
	if *s == "" || len(*s) > internMaxLen {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[*s]; ok {
		*s = v
		return
	}
	if len(in.m) < internMaxEntries {
		in.m[*s] = *s
	}
}

// internSession shares the low-cardinality strings of a cached AgentSession.
func (in *interner) internSession(s *agentsv1alpha1.AgentSession) {
	in.intern(&s.Namespace)
	in.intern(&s.APIVersion)
	in.intern(&s.Kind)
	if len(s.Labels) > 0 {
		labels := make(map[string]string, len(s.Labels))
		for k, v := range s.Labels {
			in.intern(&k)
			in.intern(&v)
			labels[k] = v
		}
		s.Labels = labels
	}
	if s.Spec.PlanMode.ConfigRef != nil {
		in.intern(&s.Spec.PlanMode.ConfigRef.Name)
	}
	pm := &s.Status.PlanMode
	in.intern((*string)(&pm.PendingSource))
	in.intern(&pm.StoreID)
	if c := pm.Config; c != nil {
		in.intern(&c.Name)
		in.intern(&c.SectionSHA256)
	}
	if n := pm.Notice; n != nil {
		in.intern(&n.Text)
	}
	if b := pm.LastBoundary; b != nil {
		in.intern((*string)(&b.Result))
		in.intern(&b.Notice)
		in.intern(&b.Reason)
		in.intern(&b.Message)
	}
	for i := range pm.Changes {
		c := &pm.Changes[i]
		in.intern((*string)(&c.Cause))
		if a := c.By; a != nil {
			in.intern(&a.Username)
			in.intern(&a.UID)
			for j := range a.Groups {
				in.intern(&a.Groups[j])
			}
		}
	}
	for i := range s.Status.Conditions {
		c := &s.Status.Conditions[i]
		in.intern(&c.Type)
		in.intern((*string)(&c.Status))
		in.intern(&c.Reason)
		in.intern(&c.Message)
	}
}
