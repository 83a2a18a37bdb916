package sessionlog

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// The durability test re-executes the test binary as an appender (TestMain sees these
// variables), reads the seqs it acknowledges, kills it with SIGKILL mid-stream and checks
// that every acknowledged event can be read back.
const (
	durabilityChildEnv   = "SESSIONLOG_DURABILITY_CHILD" // store URL
	durabilitySessionEnv = "SESSIONLOG_DURABILITY_SESSION"
)

// durabilityCycle is what the appender writes, over and over: every kind of event the tail
// fold tracks, so the tail row's consistency after the kill is checked too.
func durabilityCycle(turn int64, active bool) []harness.Event {
	return []harness.Event{
		harness.MustEvent(harness.TypeTurnStart, harness.TurnStart{Turn: turn}),
		harness.MustEvent(harness.TypeStepStart, harness.StepStart{Turn: turn, Step: 1}),
		harness.MustEvent(harness.TypePlanMode, harness.PlanMode{Active: active}),
		harness.MustEvent(harness.TypeRequestHeader, harness.RequestHeader{Header: harness.EpochHeader{Config: harness.LLMCallConfig{Model: "m"}}, Reason: harness.HeaderReasonChange}),
		harness.MustEvent(harness.TypeStepEnd, harness.StepEnd{Turn: turn, Step: 1}),
		harness.MustEvent(harness.TypeTurnEnd, harness.TurnEnd{Turn: turn, Reason: harness.TurnCompleted}),
	}
}

// durabilityChild appends until killed, printing "ack <last seq>" after each acknowledged
// Append (batches of 1 to 3 events). It returns an exit code.
func durabilityChild() int {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(durabilityChildEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	id := os.Getenv(durabilitySessionEnv)
	var pending []harness.Event
	for turn := int64(1); ; turn++ {
		pending = append(pending, durabilityCycle(turn, turn%2 == 1)...)
		for len(pending) >= 3 {
			n := 1 + int(turn+int64(len(pending)))%3
			tail, err := s.Tail(ctx, id)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 4
			}
			tail, err = s.Append(ctx, id, harness.Sequence(tail.NextSeq, pending[:n]...))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 5
			}
			// Written with one unbuffered write after Append returned: the parent only
			// counts a seq it has read here.
			if _, err := fmt.Fprintf(os.Stdout, "ack %d\n", tail.NextSeq-1); err != nil {
				return 6
			}
			pending = pending[n:]
		}
	}
}

func runDurability(t *testing.T, url string) {
	const killAfter = 300 // acknowledged appends before the kill
	id := "durable-" + strings.ToLower(t.Name())
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), durabilityChildEnv+"="+url, durabilitySessionEnv+"="+id)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := make(chan int64)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			seq, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "ack "), 10, 64)
			if err != nil {
				done <- fmt.Errorf("bad line from appender: %q", sc.Text())
				return
			}
			acks <- seq
		}
		done <- sc.Err()
	}()
	var acked []int64
	killed := false
	timeout := time.After(2 * time.Minute)
	for reading := true; reading; {
		select {
		case seq := <-acks:
			acked = append(acked, seq)
			if len(acked) == killAfter && !killed {
				// Mid-stream: the appender is inside its loop, probably inside an Append.
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			reading = false
		case <-timeout:
			_ = cmd.Process.Kill()
			t.Fatalf("appender acknowledged only %d appends in 2 minutes; stderr: %s", len(acked), stderr.String())
		}
	}
	werr := cmd.Wait()
	if !killed {
		t.Fatalf("appender exited before the kill (%v): %s", werr, stderr.String())
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("appender did not die of SIGKILL: %v; stderr: %s", werr, stderr.String())
	}
	last := acked[len(acked)-1]

	// A fresh process-level open (SQLite recovers its WAL here) sees every acknowledged event.
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	evs, err := s.ReadFrom(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) <= last {
		t.Fatalf("%d appends (through seq %d) were acknowledged before SIGKILL but only %d events are stored", len(acked), last, len(evs))
	}
	tail, err := s.Tail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	folded, err := harness.FoldTail(evs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tail, folded) {
		t.Fatalf("stored tail %s disagrees with the fold of the stored log %s", fmtTail(tail), fmtTail(folded))
	}
	// The log is the appender's exact sequence: nothing torn or reordered.
	var want []harness.Event
	for turn := int64(1); int64(len(want)) < int64(len(evs)); turn++ {
		want = append(want, durabilityCycle(turn, turn%2 == 1)...)
	}
	for i, e := range evs {
		if e.Type != want[i].Type || !jsonEqual(e.Data, want[i].Data) {
			t.Fatalf("event %d = %s %s, want %s %s", i, e.Type, e.Data, want[i].Type, want[i].Data)
		}
	}
	t.Logf("appender killed with SIGKILL after %d acknowledged appends (last acknowledged seq %d); %d events stored, all acknowledged ones readable", len(acked), last, len(evs))
	// The log stays writable after the crash.
	if _, err := s.Append(context.Background(), id, harness.Sequence(tail.NextSeq, ev("after/crash", `{}`))); err != nil {
		t.Fatalf("append after the crash: %v", err)
	}
}

func TestSQLiteDurabilityUnderSIGKILL(t *testing.T) {
	runDurability(t, "sqlite://"+filepath.Join(t.TempDir(), "log.db"))
}

func TestPostgresDurabilityUnderSIGKILL(t *testing.T) {
	runDurability(t, postgresDB(t))
}
