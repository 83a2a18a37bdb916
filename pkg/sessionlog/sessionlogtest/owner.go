package sessionlogtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// claimOwner: a log has one owning AgentSession. The first claim holds, across processes and
// reopenings; another namespace or name gets the holder back; the same namespace/name
// re-claims with a new UID (a session deleted and created again); concurrent claimers from
// separate connections all see one and the same winner.
func (b Backend) claimOwner(t *testing.T) {
	ctx := context.Background()
	id := sid(t)
	s1, s2 := b.store(t), b.store(t)
	const nsA = "team-a"
	teamA := sessionlog.Owner{Namespace: nsA, Name: "s1", UID: "uid-a"}
	teamB := sessionlog.Owner{Namespace: "team-b", Name: "s1", UID: "uid-b"}

	claim := func(s sessionlog.Store, o sessionlog.Owner) sessionlog.Owner {
		t.Helper()
		got, err := s.ClaimOwner(ctx, id, o)
		if err != nil {
			t.Fatalf("claim %s for %s: %v", id, o, err)
		}
		return got
	}
	if got := claim(s1, teamA); got != teamA {
		t.Fatalf("first claim = %+v, want %+v", got, teamA)
	}
	if got := claim(s2, teamB); got != teamA {
		t.Fatalf("a claim from another namespace = %+v, want the holder %+v", got, teamA)
	}
	renamed := sessionlog.Owner{Namespace: nsA, Name: "s2", UID: "uid-a2"}
	if got := claim(s2, renamed); got != teamA {
		t.Fatalf("a claim from another name = %+v, want the holder %+v", got, teamA)
	}
	recreated := sessionlog.Owner{Namespace: nsA, Name: "s1", UID: "uid-a-new"}
	if got := claim(s2, recreated); got != recreated {
		t.Fatalf("the same namespace/name with a new uid = %+v, want it to re-claim: %+v", got, recreated)
	}
	if got := claim(b.store(t), teamB); got != recreated {
		t.Fatalf("after reopening, a foreign claim = %+v, want %+v", got, recreated)
	}
	if _, err := s1.ClaimOwner(ctx, id, sessionlog.Owner{Namespace: nsA, Name: "s1"}); err == nil {
		t.Fatal("a claim without a uid was accepted")
	}
	// The claim never touches the log.
	if evs := readAll(t, s1, id); len(evs) != 0 {
		t.Fatalf("claim wrote %d events", len(evs))
	}

	race := id + ".race"
	const claimers = 6
	stores := make([]sessionlog.Store, claimers)
	for i := range stores {
		stores[i] = b.store(t)
	}
	winners := make([]sessionlog.Owner, claimers)
	var wg sync.WaitGroup
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := sessionlog.Owner{Namespace: fmt.Sprintf("ns-%d", i), Name: "s", UID: fmt.Sprintf("u-%d", i)}
			got, err := stores[i].ClaimOwner(ctx, race, o)
			if err != nil {
				t.Errorf("claimer %d: %v", i, err)
				return
			}
			winners[i] = got
		}()
	}
	wg.Wait()
	for i, w := range winners {
		if w != winners[0] {
			t.Fatalf("claimers disagree on the owner: %d saw %+v, 0 saw %+v", i, w, winners[0])
		}
	}
}
