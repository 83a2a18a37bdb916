package main

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// shardRun is one run of the shards phase over 4 sessions, two per shard (a: 0 and 2, b: 1
// and 3): every session of shard a acknowledged after ackA, of shard b after one second, shard
// b's last toggle committed at doneB, one write per idle toggle.
func shardRun(ackA, doneB time.Duration) *stormResult {
	return &stormResult{
		n: 4, shardCnt: 2, shardOf: []int{0, 1, 0, 1},
		ackLat:     []time.Duration{ackA, time.Second, ackA, time.Second},
		doneAt:     []time.Duration{time.Second, doneB, time.Second, doneB},
		shardFP:    make([][4]footprint, 2),
		idleToggle: writes{status: 4},
		idleSteps:  4,
	}
}

// The shards phase is reported as the storms are: per shard, the median over runs, so that one
// slow run (here the manager's third) does not decide a figure.
func TestShardFiguresAreMediansOverRuns(t *testing.T) {
	rep := &report{shardStore: "sqlite"}
	for _, r := range []*stormResult{shardRun(1*time.Second, time.Second), shardRun(5*time.Second, time.Second), shardRun(2*time.Second, time.Second)} {
		rep.addShards("floor", r)
	}
	for _, r := range []*stormResult{shardRun(3*time.Second, 1200*time.Millisecond), shardRun(2500*time.Millisecond, 9*time.Second), shardRun(100*time.Second, 1100*time.Millisecond)} {
		rep.addShards("manager", r)
	}
	var out bytes.Buffer
	rep.print(&out, opts{})
	lines := map[string]bool{}
	for _, l := range strings.Split(out.String(), "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range []string{
		"-- 2 shards on one control plane, 2 sessions each, 4 in all, sqlite log (floor: 2 floor processes with the same selectors; median of 3 run(s))",
		"shard a: ack latency p50 2000.00ms 3000.00ms 1.50x <= 1.2x MISS",
		"shard b: ack latency p50 1000.00ms 1000.00ms 1.00x <= 1.2x ok",
		"shard b: toggle storm committed 1s 1.2s 1.20x <= 1.2x ok",
		"all shards: writes but Events / idle toggle 1.00 1.00 1.00x <= 1 ok",
		"all shards: API writes / idle toggle, Events included 1.00 1.00 1.00x",
	} {
		if !lines[want] {
			t.Errorf("the report has no line %q; it is:\n%s", want, out.String())
		}
	}
	// Each run's write split, raw, as the storms' are.
	if !strings.Contains(out.String(), "\nshards sqlite/manager run 3: in-turn {") {
		t.Errorf("the report has no raw line for the manager's third shards run; it is:\n%s", out.String())
	}
}

// With several runs, each run's ratios are printed beside the medians: two runs whose ratios
// are 2.00x and 0.50x have a median ratio near 1, and the reader should see the spread.
func TestStormRunsPrintTheirRatiosRunByRun(t *testing.T) {
	run := func(ack, toggle time.Duration) *stormResult {
		return &stormResult{n: 2, ackLat: []time.Duration{ack, ack}, toggleConv: toggle, idleSteps: 2}
	}
	rep := &report{}
	rep.addStorm("sqlite", "floor", run(time.Second, 2*time.Second))
	rep.addStorm("sqlite", "floor", run(4*time.Second, 2*time.Second))
	rep.addStorm("sqlite", "manager", run(2*time.Second, 3*time.Second))
	rep.addStorm("sqlite", "manager", run(2*time.Second, time.Second))
	var out bytes.Buffer
	rep.print(&out, opts{stores: []string{"sqlite"}})
	want := "\nsqlite, run by run (manager/floor of the same run): ack p50 2.00x 0.50x; ack p99 2.00x 0.50x; toggle storm 1.50x 0.50x\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("the report has no line %q; it is:\n%s", strings.TrimSpace(want), out.String())
	}
}

// Events are API writes: in the total beside the writes the targets bound, in their own column
// of the writes table, and in its total.
func TestEventsCountAsWrites(t *testing.T) {
	run := func(status, events float64) *stormResult {
		return &stormResult{n: 2, ackLat: []time.Duration{time.Second}, toggleConv: time.Second, idleSteps: 2,
			inTurn: writes{status: 2 * status, agent: 2 * 2, events: 2 * events}, idleToggle: writes{status: 2, events: 2 * events}}
	}
	rep := &report{}
	rep.addStorm("sqlite", "floor", run(1, 0))
	rep.addStorm("sqlite", "manager", run(1, 1.5))
	var out bytes.Buffer
	rep.print(&out, opts{stores: []string{"sqlite"}})
	lines := map[string]bool{}
	for _, l := range strings.Split(out.String(), "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range []string{
		"API writes / in-turn toggle, Events included 3.00 4.50 1.50x <= 3 MISS",
		"writes but Events 3.00 3.00 1.00x <= 3 ok",
		"Events 0.00 1.50 -",
		"API writes / idle toggle, Events included 1.00 2.50 2.50x <= 2 MISS",
		"writes but Events 1.00 1.00 1.00x <= 1 ok",
		"API writes by kind side run operations manager: status manager: other agents Events total total / operation 409s among them 429s refused",
		"sqlite, in-turn toggles manager 1 2 2 0 4 3 9 4.50 0 0",
		"sqlite, idle toggles floor 1 2 2 0 0 0 2 1.00 0 0",
	} {
		if !lines[want] {
			t.Errorf("the report has no line %q; it is:\n%s", want, out.String())
		}
	}
}

// The idle phase prints, per session count, the first start and the restart: the take-on
// time against its 1.2x target, the restart's API and store writes against 0, and at 10,000
// sessions the settled and peak RSS (VmHWM) against 1.0x the floor's. Over several runs each
// figure is the median, a write that must be 0 the most in any run, and each run's ratios
// follow the table.
func TestIdlePrintsStartUpAndRestart(t *testing.T) {
	run := func(dur time.Duration, api, store float64, rss, hwm int64) takeOnRun {
		return takeOnRun{quietWait: dur / 5, dur: dur, firstWrite: dur / 4, reconciles: 10000, api: writes{status: api}, storeRows: int64(store),
			apiCPU: dur / 2, etcdCPU: dur / 10, fp: footprint{rssEnd: rss, hwm: hwm}}
	}
	rep := &report{idle: map[int]map[string][]*idleResult{10000: {
		"floor": {
			{n: 10000, first: run(10*time.Second, 10000, 0, 40<<20, 50<<20), restart: run(2*time.Second, 0, 0, 40<<20, 50<<20)},
			{n: 10000, first: run(20*time.Second, 10000, 0, 40<<20, 50<<20), restart: run(2*time.Second, 0, 0, 40<<20, 50<<20)},
			{n: 10000, first: run(10*time.Second, 10000, 0, 40<<20, 50<<20), restart: run(2*time.Second, 0, 0, 40<<20, 50<<20)},
		},
		"manager": {
			{n: 10000, first: run(11*time.Second, 10000, 10000, 60<<20, 90<<20), restart: run(3*time.Second, 0, 0, 40<<20, 45<<20)},
			{n: 10000, first: run(11*time.Second, 10000, 10000, 60<<20, 90<<20), restart: run(3*time.Second, 0, 1, 40<<20, 45<<20)},
			{n: 10000, first: run(30*time.Second, 10000, 10000, 60<<20, 90<<20), restart: run(3*time.Second, 0, 0, 40<<20, 45<<20)},
		},
	}}}
	var out bytes.Buffer
	rep.print(&out, opts{})
	got := map[string]int{}
	for _, l := range strings.Split(out.String(), "\n") {
		got[strings.Join(strings.Fields(l), " ")]++
	}
	for _, want := range []string{
		"-- 10000 idle sessions, no agents (SQLite log): first start (fresh sessions, fresh store) (median of 3 runs)",
		"start -> every session taken on 10s 11s 1.10x <= 1.2x ok",
		"before the start: kube-apiserver and etcd quiet after 2s 2.2s 1.10x",
		"kube-apiserver's CPU over the same time 5s 5.5s 1.10x",
		"of which start -> first status write (the process's own count) 2.5s 2.75s 1.10x",
		"etcd's CPU over the same time 1s 1.1s 1.10x",
		"start -> every session taken on 2s 3s 1.50x <= 1.2x MISS",
		"log store rows written (the store's count) 0.00 10000.00 -",
		"API writes (status, Events included) (most in a run) 0.00 0.00 - 0 ok",
		"log store writes (the store's count) (most in a run) 0.00 1.00 - 0 MISS",
		"RSS settled (VmRSS) 40.0MiB 60.0MiB 1.50x <= 1.0x MISS",
		"RSS peak since start (VmHWM) 50.0MiB 90.0MiB 1.80x <= 1.0x MISS",
		"RSS settled (VmRSS) 40.0MiB 40.0MiB 1.00x <= 1.0x ok",
		"RSS peak since start (VmHWM) 50.0MiB 45.0MiB 0.90x <= 1.0x ok",
		"peak / settled 1.25x 1.50x 1.20x",
		"idle, 10000 sessions, run by run (manager/floor of the same run): first start 1.10x 0.55x 3.00x; restart 1.50x 1.50x 1.50x; " +
			"first start's RSS settled 1.50x 1.50x 1.50x; peak 1.80x 1.80x 1.80x; restart's RSS settled 1.00x 1.00x 1.00x; peak 0.90x 0.90x 0.90x",
	} {
		if got[want] == 0 {
			t.Errorf("the report has no line %q; it is:\n%s", want, out.String())
		}
	}
}

// The benchmark's own process: its code and the runtime's function tables are resident (it is
// running, and the garbage collector has scanned its stacks), and the split counts no page
// that RssFile does not.
func TestBinaryPagesSplitsTheResidentPagesOfTheBinary(t *testing.T) {
	runtime.GC() // a stack scan reads the function tables
	split, err := binaryPages(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if split.code == 0 || split.tables == 0 || split.rest == 0 {
		t.Fatalf("resident pages of the binary by section: %+v; want each part above zero", split)
	}
	if sum, file := split.code+split.tables+split.rest, procStatus(os.Getpid(), "RssFile:"); sum > file {
		t.Fatalf("the split counts %d bytes, more than RssFile's %d", sum, file)
	}
}
