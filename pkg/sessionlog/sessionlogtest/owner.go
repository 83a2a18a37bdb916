package sessionlogtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
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
	teamA := sessionlog.Owner{Namespace: nsA, Name: "s1", UID: "uid-a"}
	teamB := sessionlog.Owner{Namespace: nsB, Name: "s1", UID: "uid-b"}

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

// The namespaces and AgentSessions of the ownership tests: the parent's owner and a child in
// its namespace, and another tenant.
const (
	nsA     = "team-a"
	nsB     = "team-b"
	later   = "later"
	parentS = "parent"
)

var (
	forkOwner = sessionlog.Owner{Namespace: nsA, Name: parentS, UID: "uid-parent"}
	forkChild = sessionlog.Owner{Namespace: nsA, Name: "child", UID: "uid-child"}
)

func claimFor(t *testing.T, s sessionlog.Store, id string, o sessionlog.Owner) {
	t.Helper()
	if got, err := s.ClaimOwner(context.Background(), id, o); err != nil || got != o {
		t.Fatalf("claim %s for %s: %+v, %v", id, o, got, err)
	}
}

// wantRefusal fails t unless err is an *OwnershipError with refusal r.
func wantRefusal(t *testing.T, what string, err error, r sessionlog.OwnershipRefusal) {
	t.Helper()
	var o *sessionlog.OwnershipError
	if !errors.As(err, &o) || o.Refusal != r {
		t.Fatalf("%s: err = %v, want an ownership refusal %s", what, err, r)
	}
}

// wantNoLog fails t if id has a header or an owner record: a refused write left nothing.
func wantNoLog(t *testing.T, s sessionlog.Store, id string) {
	t.Helper()
	if _, err := s.Info(context.Background(), id); !errors.Is(err, sessionlog.ErrNotFound) {
		t.Fatalf("a refused write created session %s: %v", id, err)
	}
	if o, ok, err := s.OwnerOf(context.Background(), id); ok || err != nil {
		t.Fatalf("a refused write recorded an owner of %s: %+v, %v", id, o, err)
	}
}

// forkOwnership: who may fork whom is decided in the store's transaction. A parent owned by a
// session of another namespace, or by none, is refused; so is a child another session owns.
// An allowed fork records the child's owner.
func (b Backend) forkOwnership(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	parent := sid(t)
	completed := harness.TurnCompleted
	mustAppend(t, s, parent, harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 1}),
		harness.MustEvent(harness.TypeTurnEnd, harness.TurnEnd{Turn: 1, Reason: completed}))

	stranger := sessionlog.Owner{Namespace: nsB, Name: "thief", UID: "uid-b"}
	_, err := s.Fork(ctx, parent, parent+"-unowned", -1, forkChild)
	wantRefusal(t, "fork of a log nobody owns", err, sessionlog.RefusedParentUnowned)
	wantNoLog(t, s, parent+"-unowned")

	claimFor(t, s, parent, forkOwner)
	_, err = s.Fork(ctx, parent, parent+"-stolen", -1, stranger)
	wantRefusal(t, "fork from another namespace", err, sessionlog.RefusedParentOfAnotherNamespace)
	wantNoLog(t, s, parent+"-stolen")
	if !strings.Contains(err.Error(), `namespace "`+nsB+`"`) || strings.Contains(err.Error(), nsA) {
		t.Fatalf("the refusal must name the requester's namespace and not the owner's: %v", err)
	}

	taken := parent + "-taken"
	claimFor(t, s, taken, sessionlog.Owner{Namespace: nsA, Name: "other", UID: "uid-o"})
	_, err = s.Fork(ctx, parent, taken, -1, forkChild)
	wantRefusal(t, "fork into another session's log", err, sessionlog.RefusedOwnedByAnother)
	if _, err := s.Info(ctx, taken); !errors.Is(err, sessionlog.ErrNotFound) {
		t.Fatalf("the refused fork seeded %s: %v", taken, err)
	}

	child := parent + "-child"
	if _, err := s.Fork(ctx, parent, child, -1, forkChild); err != nil {
		t.Fatalf("fork within the namespace: %v", err)
	}
	if o, ok, err := s.OwnerOf(ctx, child); err != nil || !ok || o != forkChild {
		t.Fatalf("owner of the fork = %+v, %v, %v; want %+v", o, ok, err, forkChild)
	}
	// The child's owner may fork it in turn; a stranger still may not fork the child.
	if _, err := s.Fork(ctx, child, child+"-grandchild", -1, sessionlog.Owner{Namespace: nsA, Name: "gc", UID: "u-gc"}); err != nil {
		t.Fatalf("fork of the fork within the namespace: %v", err)
	}
	_, err = s.Fork(ctx, child, child+"-stolen", -1, stranger)
	wantRefusal(t, "fork of the fork from another namespace", err, sessionlog.RefusedParentOfAnotherNamespace)
}

// seedOwnership: an import (Seed) never writes into a log another session owns, records the
// owner it is given, and with no owner writes only where nobody owns the log.
func (b Backend) seedOwnership(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := sid(t)
	events := harness.Sequence(0, ev("a", `{}`))
	claimFor(t, s, id, forkOwner)
	_, err := s.Seed(ctx, sessionlog.SessionInfo{ID: id}, events, sessionlog.Owner{Namespace: nsB, Name: "x", UID: "u"})
	wantRefusal(t, "import into another session's log", err, sessionlog.RefusedOwnedByAnother)
	_, err = s.Seed(ctx, sessionlog.SessionInfo{ID: id}, events, sessionlog.Owner{})
	wantRefusal(t, "import with no owner into an owned log", err, sessionlog.RefusedOwnedByAnother)
	if _, err := s.Info(ctx, id); !errors.Is(err, sessionlog.ErrNotFound) {
		t.Fatalf("a refused import wrote %s: %v", id, err)
	}
	// The owner itself may import into its log, once.
	if _, err := s.Seed(ctx, sessionlog.SessionInfo{ID: id}, events, forkOwner); err != nil {
		t.Fatalf("import by the owner: %v", err)
	}

	// Reserved for a session not created yet: its first claim records the UID.
	reserved := id + "-reserved"
	if _, err := s.Seed(ctx, sessionlog.SessionInfo{ID: reserved}, events, sessionlog.Owner{Namespace: nsA, Name: later}); err != nil {
		t.Fatalf("import for a named owner: %v", err)
	}
	if got, err := s.ClaimOwner(ctx, reserved, sessionlog.Owner{Namespace: nsB, Name: later, UID: "u-b"}); err != nil || got.Namespace != nsA {
		t.Fatalf("a claim from another namespace of a reserved log = %+v, %v", got, err)
	}
	later := sessionlog.Owner{Namespace: nsA, Name: later, UID: "u-later"}
	if got, err := s.ClaimOwner(ctx, reserved, later); err != nil || got != later {
		t.Fatalf("the reserved session's claim = %+v, %v; want %+v", got, err, later)
	}

	free := id + "-free"
	if _, err := s.Seed(ctx, sessionlog.SessionInfo{ID: free}, events, sessionlog.Owner{}); err != nil {
		t.Fatalf("import with no owner where nobody owns the log: %v", err)
	}
	if _, ok, err := s.OwnerOf(ctx, free); ok || err != nil {
		t.Fatalf("an import with no owner recorded one: %v, %v", ok, err)
	}
}

// releaseOwner: the record outlives the AgentSession until a release names its owner. A
// release naming another owner changes nothing; after a release the log belongs to nobody, so
// no one may fork it, and the next claim takes it.
func (b Backend) releaseOwner(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := sid(t)
	mustAppend(t, s, id, ev("a", `{}`))
	claimFor(t, s, id, forkOwner)
	err := s.ReleaseOwner(ctx, id, sessionlog.Owner{Namespace: nsB, Name: parentS})
	wantRefusal(t, "release naming another owner", err, sessionlog.RefusedNotTheOwner)
	if o, ok, err := s.OwnerOf(ctx, id); !ok || err != nil || o != forkOwner {
		t.Fatalf("a refused release changed the owner: %+v, %v, %v", o, ok, err)
	}
	if err := s.ReleaseOwner(ctx, id, sessionlog.Owner{Namespace: nsA, Name: parentS}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, ok, err := s.OwnerOf(ctx, id); ok || err != nil {
		t.Fatalf("owner after release: %v, %v", ok, err)
	}
	if err := s.ReleaseOwner(ctx, id, forkOwner); err == nil {
		t.Fatal("a second release succeeded")
	}
	_, err = s.Fork(ctx, id, id+"-child", -1, forkChild)
	wantRefusal(t, "fork of a released log", err, sessionlog.RefusedParentUnowned)
	next := sessionlog.Owner{Namespace: nsB, Name: "heir", UID: "u-heir"}
	if got, err := s.ClaimOwner(ctx, id, next); err != nil || got != next {
		t.Fatalf("claim after release = %+v, %v; want %+v", got, err, next)
	}
	if n := len(readAll(t, s, id)); n != 1 {
		t.Fatalf("release changed the log: %d events", n)
	}
}

// sessions: one read gives every session's tail and owner, as Tail and OwnerOf give them one by
// one, each session once: a log with an owner, an owner with no log yet, a log with none.
func (b Backend) sessions(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	owned, claimedOnly, unowned := sid(t)+".owned", sid(t)+".claimed", sid(t)+".unowned"
	header := harness.MustEvent(harness.TypeRequestHeader, harness.RequestHeader{
		Header: harness.EpochHeader{Config: harness.LLMCallConfig{Provider: "deepseek", Model: "m"}},
		Reason: harness.HeaderReasonInitial,
	})
	mustAppend(t, s, owned, harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: true}),
		harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 1}),
		harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: 1, Step: 1}), header)
	mustAppend(t, s, unowned, harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: 1}))
	a := sessionlog.Owner{Namespace: nsA, Name: "owned", UID: "uid-1"}
	c := sessionlog.Owner{Namespace: nsA, Name: "claimed", UID: "uid-2"}
	claimFor(t, s, owned, a)
	claimFor(t, s, claimedOnly, c)

	want := map[string]sessionlog.SessionState{}
	for id, o := range map[string]sessionlog.Owner{owned: a, claimedOnly: c, unowned: {}} {
		tail, err := s.Tail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = sessionlog.SessionState{ID: id, Tail: tail, Owner: o}
	}
	got := map[string]sessionlog.SessionState{}
	if err := s.Sessions(ctx, func(st sessionlog.SessionState) error {
		if !strings.HasPrefix(st.ID, sid(t)+".") {
			return nil // another test's session in the shared database
		}
		if _, seen := got[st.ID]; seen {
			return fmt.Errorf("session %s given twice", st.ID)
		}
		got[st.ID] = st
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Sessions gave\n%+v\nwant\n%+v", got, want)
	}
	if want[owned].Tail.LastShown == nil || !want[owned].Tail.Active {
		t.Fatalf("the owned session's tail %s lacks what the test set", fmtTail(want[owned].Tail))
	}

	stop := errors.New("stop")
	calls := 0
	err := s.Sessions(ctx, func(sessionlog.SessionState) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Sessions after fn's error: %v after %d call(s); want fn's error after 1", err, calls)
	}
}

// claimOwners: many claims at once hold as each would alone: a new log becomes the claimer's,
// a log another session holds stays that session's, the same session under a new UID re-records
// it, and two claims of one log in the batch leave it to the first. A claim the store refuses
// to take (no UID) fails the batch before anything is written.
func (b Backend) claimOwners(t *testing.T) {
	ctx := context.Background()
	s := b.store(t)
	id := func(k string) string { return sid(t) + "." + k }
	a := sessionlog.Owner{Namespace: nsA, Name: "a", UID: "uid-a"}
	other := sessionlog.Owner{Namespace: nsB, Name: "b", UID: "uid-other"}
	claimFor(t, s, id("held"), other)
	claimFor(t, s, id("recreated"), sessionlog.Owner{Namespace: nsA, Name: "r", UID: "uid-old"})
	r := sessionlog.Owner{Namespace: nsA, Name: "r", UID: "uid-new"}
	second := sessionlog.Owner{Namespace: "team-c", Name: "c", UID: "uid-c"}

	// More claims than one transaction writes, so the batch spans several.
	claims := make([]sessionlog.OwnerClaim, 0, 1204)
	for i := range 1200 {
		claims = append(claims, sessionlog.OwnerClaim{SessionID: id(fmt.Sprintf("new-%04d", i)), Owner: a})
	}
	claims = append(claims,
		sessionlog.OwnerClaim{SessionID: id("held"), Owner: a},
		sessionlog.OwnerClaim{SessionID: id("recreated"), Owner: r},
		sessionlog.OwnerClaim{SessionID: id("twice"), Owner: a},
		sessionlog.OwnerClaim{SessionID: id("twice"), Owner: second})
	held, err := s.ClaimOwners(ctx, claims)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != len(claims) {
		t.Fatalf("ClaimOwners gave %d holders for %d claims", len(held), len(claims))
	}
	want := func(i int, o sessionlog.Owner) {
		t.Helper()
		if held[i] != o {
			t.Fatalf("claim %d (%s for %s): holder %+v, want %+v", i, claims[i].SessionID, claims[i].Owner, held[i], o)
		}
		got, ok, err := s.OwnerOf(ctx, claims[i].SessionID)
		if err != nil || !ok || got != o {
			t.Fatalf("owner of %s after the batch: %+v, %v, %v; want %+v", claims[i].SessionID, got, ok, err, o)
		}
	}
	for i := range 1200 {
		want(i, a)
	}
	want(1200, other)
	want(1201, r)
	want(1202, a)
	want(1203, a)

	bad := []sessionlog.OwnerClaim{{SessionID: id("bad-1"), Owner: a}, {SessionID: id("bad-2"), Owner: sessionlog.Owner{Namespace: nsA, Name: "x"}}}
	if _, err := s.ClaimOwners(ctx, bad); err == nil {
		t.Fatal("a batch with a claim without a UID was taken")
	}
	if _, ok, err := s.OwnerOf(ctx, id("bad-1")); err != nil || ok {
		t.Fatalf("a refused batch recorded its first claim: %v, %v", ok, err)
	}
}
