package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

type report struct {
	storm      map[string]map[string][]*stormResult // store -> side -> runs
	idle       map[int]map[string][]*idleResult     // sessions -> side -> runs
	appends    []appendResult
	tail       []tailResult
	webhook    *webhookResult
	events     []*eventsResult
	sharded    map[string][]*stormResult // side -> runs of the shards phase
	shardStore string
}

func (r *report) addStorm(store, side string, s *stormResult) {
	if r.storm == nil {
		r.storm = map[string]map[string][]*stormResult{}
	}
	if r.storm[store] == nil {
		r.storm[store] = map[string][]*stormResult{}
	}
	r.storm[store][side] = append(r.storm[store][side], s)
}

func (r *report) addShards(side string, s *stormResult) {
	if r.sharded == nil {
		r.sharded = map[string][]*stormResult{}
	}
	r.sharded[side] = append(r.sharded[side], s)
}

// shardAcks is the ack latencies of shard k's sessions in one run.
func (s *stormResult) shardAcks(k int) []time.Duration {
	var out []time.Duration
	for i, l := range s.ackLat {
		if s.shardOf[i] == k {
			out = append(out, l)
		}
	}
	return out
}

// shardCommitted is when the last of shard k's sessions showed its toggle committed.
func (s *stormResult) shardCommitted(k int) time.Duration {
	var m time.Duration
	for i, d := range s.doneAt {
		if s.shardOf[i] == k && d > m {
			m = d
		}
	}
	return m
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ackAt is a run's ack latency at quantile q; toggleTime its toggle storm's length.
func ackAt(q float64) func(*stormResult) float64 {
	return func(s *stormResult) float64 { return float64(percentile(s.ackLat, q)) }
}

func toggleTime(s *stormResult) float64 { return float64(s.toggleConv) }

// med is the median over runs of f.
func med[T any](runs []T, f func(T) float64) float64 {
	v := make([]float64, 0, len(runs))
	for _, r := range runs {
		v = append(v, f(r))
	}
	return median(v)
}

// most is the most over runs of f: for a figure whose target holds in every run.
func most[T any](runs []T, f func(T) float64) float64 {
	var m float64
	for _, r := range runs {
		m = max(m, f(r))
	}
	return m
}

func msf(v float64) string  { return fmt.Sprintf("%.2fms", v/1e6) }
func sec(v float64) string  { return time.Duration(v).Round(time.Millisecond).String() }
func num(v float64) string  { return fmt.Sprintf("%.2f", v) }
func byt(v float64) string  { return fmt.Sprintf("%.0fB", v) }
func mib(v float64) string  { return fmt.Sprintf("%.1fMiB", v/(1<<20)) }
func core(v float64) string { return fmt.Sprintf("%.2f", v) }

// table is the report's side-by-side table: per figure the floor's value, the manager's, their
// ratio and the target, with whether the manager meets it.
type table struct{ tw *tabwriter.Writer }

// row prints one figure. A negative floor is a figure with no floor value; ok, when set, says
// whether the manager meets the target.
func (t table) row(label string, floor, mgr float64, f func(float64) string, target string, ok *bool) {
	ratio := "-"
	if floor > 0 {
		ratio = fmt.Sprintf("%.2fx", mgr/floor)
	}
	fl := "-"
	if floor >= 0 {
		fl = f(floor)
	}
	if ok != nil {
		if *ok {
			target += " ok"
		} else {
			target += " MISS"
		}
	}
	fmt.Fprintf(t.tw, "%s\t%s\t%s\t%s\t%s\t\n", label, fl, f(mgr), ratio, target)
}

// met is a target check for row.
func met(v bool) *bool { return &v }

// per(phase, part, of) is, for one run, a part of a phase's writes per operation of it.
func per(phase func(*stormResult) writes, part func(writes) float64, of func(*stormResult) int) func(*stormResult) float64 {
	return func(s *stormResult) float64 { return part(phase(s)) / float64(of(s)) }
}

// The phases of a storm run whose writes the report counts, and what their counts are per.
func inTurn(s *stormResult) writes     { return s.inTurn }
func idleToggle(s *stormResult) writes { return s.idleToggle }
func idleStep(s *stormResult) writes   { return s.idleStep }
func perSession(s *stormResult) int    { return s.n }
func perIdleStep(s *stormResult) int   { return s.idleSteps }
func perRun(*stormResult) int          { return 1 }

// print writes the report: the side-by-side table, then every run's writes by kind.
func (r *report) print(w io.Writer, o opts) {
	t := table{tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	fmt.Fprintln(t.tw, "figure\tfloor\tmanager\tratio\ttarget\t")
	for _, st := range o.stores {
		r.printStorms(t, o, st)
	}
	r.printShards(t)
	r.printIdle(t)
	r.printLogStore(t)
	r.printWebhooks(t)
	_ = t.tw.Flush()
	r.printEvents(w)
	r.printWrites(w, o)
	r.printRuns(w, o)
}

// printEvents prints the events phase: per Event writer and round, what the API server wrote
// and what the writer held while it wrote, and what it kept once done.
func (r *report) printEvents(w io.Writer) {
	if len(r.events) == 0 {
		return
	}
	fmt.Fprintf(w, "\nEvents: one per session for %d sessions at once, recorded in this process with the manager processes' identity\n", r.events[0].n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "writer\tround\tEvent writes / session\t429s / session\tuntil written\tpeak goroutines\tpeak stacks\tkept (live heap) / session\t")
	for _, e := range r.events {
		for i, rd := range e.rounds {
			kept := ""
			if i == len(e.rounds)-1 {
				kept = fmt.Sprintf("%d B", e.retained/int64(e.n))
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%s\t%d\t%s\t%s\t\n", e.writer, eventRounds[i], rd.writes/float64(e.n), rd.refused/float64(e.n),
				sec(float64(rd.wall)), rd.peakGoroutines, mib(float64(rd.peakStack)), kept)
		}
	}
	_ = tw.Flush()
}

// printStorms prints the storms' figures on one log backend: medians over the runs.
func (r *report) printStorms(t table, o opts, st string) {
	fl, mg := r.storm[st][sideFloor], r.storm[st][sideManager]
	if len(fl) == 0 || len(mg) == 0 {
		return
	}
	n := mg[0].n
	shape := ""
	if o.floorShape == shapeManager {
		shape = ", floor storing the manager's status shape"
	}
	fmt.Fprintf(t.tw, "-- storms, %d sessions, %s log (median of %d run(s))%s\t\t\t\t\t\n", n, st, len(mg), shape)
	// cmp prints a figure with no target: each side's median over its runs.
	cmp := func(label string, f func(*stormResult) float64, format func(float64) string) {
		t.row(label, med(fl, f), med(mg, f), format, "", nil)
	}
	f50, m50 := med(fl, ackAt(0.5)), med(mg, ackAt(0.5))
	f99, m99 := med(fl, ackAt(0.99)), med(mg, ackAt(0.99))
	t.row("boundary storm: ack latency p50", f50, m50, msf, "<= 1.2x", met(m50 <= 1.2*f50))
	t.row("boundary storm: ack latency p99", f99, m99, msf, "<= 1.5x", met(m99 <= 1.5*f99))
	cmp("boundary storm: release -> last ack", func(s *stormResult) float64 { return float64(s.ackWall) }, sec)
	fc, mc := med(fl, toggleTime), med(mg, toggleTime)
	t.row("toggle storm: every status committed", fc, mc, sec, "<= 1.2x", met(mc <= 1.2*fc))

	// Events among a storm's status writes: the most in any run, as one run with them is one
	// storm they competed in.
	for _, during := range []struct {
		label string
		f     func(*stormResult) float64
	}{
		{"Events written during the boundary storm (most in a run)", func(s *stormResult) float64 { return s.eventsInBoundary }},
		{"Events written during the toggle storm (most in a run)", func(s *stormResult) float64 { return s.eventsInToggle }},
	} {
		v := most(mg, during.f)
		t.row(during.label, most(fl, during.f), v, num, "0", met(v == 0))
	}
	// How the controllers spent each storm: with every worker busy it lasts about reconciles x
	// reconcile time / workers, and the reconcile time is mostly the status write's round trip.
	msOf := func(v float64) string { return fmt.Sprintf("%.1fms", v*1000) }
	for _, storm := range []struct {
		name string
		work func(*stormResult) stormWork
	}{
		{"boundary storm", func(s *stormResult) stormWork { return s.workBoundary }},
		{"toggle storm", func(s *stormResult) stormWork { return s.workToggle }},
	} {
		cmp("reconciles, "+storm.name, func(s *stormResult) float64 { return storm.work(s).reconciles }, num)
		cmp("  mean reconcile time", func(s *stormResult) float64 { return storm.work(s).reconcile }, msOf)
		cmp("  mean wait in the work queue", func(s *stormResult) float64 { return storm.work(s).queueWait }, msOf)
		cmp("  mean log append (the manager's)", func(s *stormResult) float64 { return storm.work(s).appendTime }, msOf)
		storms := func(s *stormResult) float64 { return storm.work(s).storms }
		t.row("  storms the manager's rule entered (most in a run)", most(fl, storms), most(mg, storms), num, "", nil)
	}

	events := func(w writes) float64 { return w.events }
	agent := func(w writes) float64 { return w.agent }
	v := med(mg, per(inTurn, writes.total, perSession))
	t.row("API writes / in-turn toggle, Events included", med(fl, per(inTurn, writes.total, perSession)), v, num, "<= 3", met(v <= 3+1e-9))
	v = med(mg, per(inTurn, writes.butEvents, perSession))
	t.row("  writes but Events", med(fl, per(inTurn, writes.butEvents, perSession)), v, num, "<= 3", met(v <= 3+1e-9))
	cmp("    of which the agent's", per(inTurn, agent, perSession), num)
	cmp("  Events", per(inTurn, events, perSession), num)
	v = med(mg, per(idleToggle, writes.total, perSession))
	t.row("API writes / idle toggle, Events included", med(fl, per(idleToggle, writes.total, perSession)), v, num, "<= 2", met(v <= 2+1e-9))
	v = med(mg, per(idleToggle, writes.butEvents, perSession))
	t.row("  writes but Events", med(fl, per(idleToggle, writes.butEvents, perSession)), v, num, "<= 1", met(v <= 1+1e-9))
	cmp("  Events", per(idleToggle, events, perSession), num)

	conflicts := func(w writes) float64 { return w.conflicts }
	cmp("409 conflicts / in-turn toggle (in the writes)", per(inTurn, conflicts, perSession), num)
	cmp("409 conflicts / idle toggle (in the writes)", per(idleToggle, conflicts, perSession), num)
	refused := func(w writes) float64 { return w.refused }
	cmp("429 refused (not in the writes) / in-turn toggle", per(inTurn, refused, perSession), num)
	cmp("429 refused (not in the writes) / idle toggle", per(idleToggle, refused, perSession), num)
	serve := func(phase func(*stormResult) writes) func(*stormResult) float64 {
		return func(s *stormResult) float64 { return phase(s).statusServeTime() }
	}
	cmp("API server time / status write, in-turn toggles", serve(inTurn), msf)
	cmp("API server time / status write, idle toggles", serve(idleToggle), msf)
	cmp("API server CPU / session, boundary storm", func(s *stormResult) float64 { return float64(s.apiCPUBoundary) / float64(s.n) }, msf)
	cmp("API server CPU / session, toggle storm", func(s *stormResult) float64 { return float64(s.apiCPUToggle) / float64(s.n) }, msf)
	cmp("session object after the boundary storm (bytes, JSON)", func(s *stormResult) float64 { return s.objBytes }, byt)
	terminated := func(w writes) float64 { return w.terminated }
	cmp("watchers closed by the API server (too slow), in-turn", per(inTurn, terminated, perRun), num)
	cmp("watchers closed by the API server (too slow), idle", per(idleToggle, terminated, perRun), num)
	watches := func(w writes) float64 { return w.watches }
	cmp("watches started (agents' re-watches), in-turn", per(inTurn, watches, perRun), num)
	cmp("watches started (agents' re-watches), idle", per(idleToggle, watches, perRun), num)
	v = med(mg, per(idleStep, writes.total, perIdleStep))
	t.row("API writes / step, nothing pending, Events included", med(fl, per(idleStep, writes.total, perIdleStep)), v, num, "0", met(v == 0))

	cmp("start -> every session taken on", func(s *stormResult) float64 { return float64(s.takeOn) }, sec)
	kib := func(v float64) string { return fmt.Sprintf("%.0f KiB", v/1024) }
	cmp("agents (this process): heap and stacks / agent", func(s *stormResult) float64 { return s.agentBytes }, kib)
	cmp("agents (this process): goroutines / agent", func(s *stormResult) float64 { return s.agentGoroutines }, num)
	rss := func(f func(*stormResult) footprint) func(*stormResult) float64 {
		return func(s *stormResult) float64 { return float64(f(s).rssPeak) }
	}
	cpu := func(f func(*stormResult) footprint) func(*stormResult) float64 {
		return func(s *stormResult) float64 { return f(s).cores() }
	}
	idle := func(s *stormResult) footprint { return s.fpIdle }
	boundary := func(s *stormResult) footprint { return s.fpBoundary }
	toggle := func(s *stormResult) footprint { return s.fpToggle }
	cmp(fmt.Sprintf("RSS, %d sessions idle", n), rss(idle), mib)
	cmp("  of which anonymous (RssAnon)", func(s *stormResult) float64 { return float64(s.fpIdle.anonEnd) }, mib)
	cmp("RSS peak, boundary storm", rss(boundary), mib)
	cmp("RSS peak, toggle storm", rss(toggle), mib)
	cmp(fmt.Sprintf("CPU (cores), %d sessions idle", n), cpu(idle), core)
	cmp("CPU (cores), boundary storm", cpu(boundary), core)
	cmp("CPU (cores), toggle storm", cpu(toggle), core)
}

// printShards prints the shards phase: per shard, then over all shards; medians over the runs.
func (r *report) printShards(t table) {
	fl, mg := r.sharded[sideFloor], r.sharded[sideManager]
	if len(fl) == 0 || len(mg) == 0 {
		return
	}
	shards := mg[0].shardCnt
	fmt.Fprintf(t.tw, "-- %d shards on one control plane, %d sessions each, %d in all, %s log (floor: %d floor processes with the same selectors; median of %d run(s))\t\t\t\t\t\n",
		shards, mg[0].n/max(1, shards), mg[0].n, r.shardStore, fl[0].shardCnt, len(mg))
	for k := 0; k < shards; k++ {
		name := fmt.Sprintf("shard %s: ", shardName(k))
		ack := func(q float64) func(*stormResult) float64 {
			return func(s *stormResult) float64 { return float64(percentile(s.shardAcks(k), q)) }
		}
		f50, m50 := med(fl, ack(0.5)), med(mg, ack(0.5))
		f99, m99 := med(fl, ack(0.99)), med(mg, ack(0.99))
		t.row(name+"ack latency p50", f50, m50, msf, "<= 1.2x", met(m50 <= 1.2*f50))
		t.row(name+"ack latency p99", f99, m99, msf, "<= 1.5x", met(m99 <= 1.5*f99))
		conv := func(s *stormResult) float64 { return float64(s.shardCommitted(k)) }
		fc, mc := med(fl, conv), med(mg, conv)
		t.row(name+"toggle storm committed", fc, mc, sec, "<= 1.2x", met(mc <= 1.2*fc))
		rssIdle := func(s *stormResult) float64 { return float64(s.shardFP[k][0].rssEnd) }
		t.row(name+"RSS settled, idle before the storms", med(fl, rssIdle), med(mg, rssIdle), mib, "", nil)
		rssAfter := func(s *stormResult) float64 { return float64(s.shardFP[k][3].rssEnd) }
		t.row(name+"RSS settled after the storms", med(fl, rssAfter), med(mg, rssAfter), mib, "", nil)
		rssPeak := func(s *stormResult) float64 { return float64(max(s.shardFP[k][1].rssPeak, s.shardFP[k][2].rssPeak)) }
		t.row(name+"RSS peak, storms (sampled)", med(fl, rssPeak), med(mg, rssPeak), mib, "", nil)
		hwm := func(s *stormResult) float64 {
			var m int64
			for _, fp := range s.shardFP[k] {
				m = max(m, fp.hwm)
			}
			return float64(m)
		}
		t.row(name+"RSS peak since start (VmHWM)", med(fl, hwm), med(mg, hwm), mib, "", nil)
		cores := func(which int) func(*stormResult) float64 {
			return func(s *stormResult) float64 { return s.shardFP[k][which].cores() }
		}
		t.row(name+"CPU (cores), boundary storm", med(fl, cores(1)), med(mg, cores(1)), core, "", nil)
		t.row(name+"CPU (cores), toggle storm", med(fl, cores(2)), med(mg, cores(2)), core, "", nil)
	}
	cmp := func(label string, f func(*stormResult) float64, format func(float64) string) {
		t.row("all shards: "+label, med(fl, f), med(mg, f), format, "", nil)
	}
	cmp("boundary storm: release -> last ack", func(s *stormResult) float64 { return float64(s.ackWall) }, sec)
	cmp("toggle storm: every status committed", toggleTime, sec)
	cmp("API server CPU / session, boundary storm", func(s *stormResult) float64 { return float64(s.apiCPUBoundary) / float64(s.n) }, msf)
	cmp("API server CPU / session, toggle storm", func(s *stormResult) float64 { return float64(s.apiCPUToggle) / float64(s.n) }, msf)
	cmp("API writes / in-turn toggle, Events included", per(inTurn, writes.total, perSession), num)
	v := med(mg, per(inTurn, writes.butEvents, perSession))
	t.row("all shards: writes but Events / in-turn toggle", med(fl, per(inTurn, writes.butEvents, perSession)), v, num, "<= 3", met(v <= 3+1e-9))
	cmp("API writes / idle toggle, Events included", per(idleToggle, writes.total, perSession), num)
	v = med(mg, per(idleToggle, writes.butEvents, perSession))
	t.row("all shards: writes but Events / idle toggle", med(fl, per(idleToggle, writes.butEvents, perSession)), v, num, "<= 1", met(v <= 1+1e-9))
	v = med(mg, per(idleStep, writes.total, perIdleStep))
	t.row("all shards: API writes / idle step, Events included", med(fl, per(idleStep, writes.total, perIdleStep)), v, num, "0", met(v == 0))
	conflicts := func(w writes) float64 { return w.conflicts }
	refused := func(w writes) float64 { return w.refused }
	v = med(mg, per(inTurn, conflicts, perRun)) + med(mg, per(idleToggle, conflicts, perRun))
	t.row("all shards: writes refused with 409, in-turn and idle toggles", med(fl, per(inTurn, conflicts, perRun))+med(fl, per(idleToggle, conflicts, perRun)), v, num, "0", met(v == 0))
	cmp("429 refused (not in the writes) / in-turn toggle", per(inTurn, refused, perSession), num)
	cmp("429 refused (not in the writes) / idle toggle", per(idleToggle, refused, perSession), num)
}

// The start-up and idle-memory targets of issue #39.
const (
	takeOnRatio = 1.2 // start -> every session taken on, first start and restart, at each size
	idleRSSSize = 10000
	rssRatio    = 1.0 // settled and peak RSS at idleRSSSize sessions
)

func peakToSettled(f footprint) float64 {
	if f.rssEnd == 0 {
		return 0
	}
	return float64(f.hwm) / float64(f.rssEnd)
}

// printIdle prints the idle phase, per session count: the first start and the restart, each
// figure the median over runs but the restart's writes, the most in a run.
func (r *report) printIdle(t table) {
	for _, n := range r.idleSizes() {
		fl, mg := r.idle[n][sideFloor], r.idle[n][sideManager]
		if len(fl) == 0 || len(mg) == 0 {
			continue
		}
		for i, what := range []string{"first start (fresh sessions, fresh store)", "restart (graceful stop, same store and sessions)"} {
			start := func(r *idleResult) *takeOnRun {
				if i == 1 {
					return &r.restart
				}
				return &r.first
			}
			of := func(f func(*takeOnRun) float64) func(*idleResult) float64 {
				return func(r *idleResult) float64 { return f(start(r)) }
			}
			// row prints the figure f of each side's start, its median over runs.
			row := func(label string, f func(*takeOnRun) float64, format func(float64) string, target string, ok func(floor, mgr float64) bool) {
				fv, mv := med(fl, of(f)), med(mg, of(f))
				var m *bool
				if ok != nil {
					m = met(ok(fv, mv))
				}
				t.row(label, fv, mv, format, target, m)
			}
			// zero prints a write count that must be 0: the most in a run.
			zero := func(label string, f func(*takeOnRun) float64) {
				if len(fl) > 1 || len(mg) > 1 {
					label += " (most in a run)"
				}
				fv, mv := most(fl, of(f)), most(mg, of(f))
				t.row(label, fv, mv, num, "0", met(mv == 0))
			}
			fmt.Fprintf(t.tw, "-- %d idle sessions, no agents (SQLite log): %s%s\t\t\t\t\t\n", n, what, runsNote(len(fl), len(mg)))
			row("before the start: kube-apiserver and etcd quiet after", func(r *takeOnRun) float64 { return float64(r.quietWait) }, sec, "", nil)
			row("start -> every session taken on", func(r *takeOnRun) float64 { return float64(r.dur) }, sec, fmt.Sprintf("<= %.1fx", takeOnRatio), within(takeOnRatio))
			row("  of which start -> ready (/readyz)", func(r *takeOnRun) float64 { return float64(r.ready) }, sec, "", nil)
			if i == 0 {
				row("  of which start -> first status write (the process's own count)", func(r *takeOnRun) float64 { return float64(r.firstWrite) }, sec, "", nil)
			}
			row("  reconciles by then", func(r *takeOnRun) float64 { return r.reconciles }, num, "", nil)
			row("  CPU used by then (the process's, from its start; load-independent)", func(r *takeOnRun) float64 { return float64(r.cpu) }, sec, "", nil)
			row("  kube-apiserver's CPU over the same time", func(r *takeOnRun) float64 { return float64(r.apiCPU) }, sec, "", nil)
			row("  etcd's CPU over the same time", func(r *takeOnRun) float64 { return float64(r.etcdCPU) }, sec, "", nil)
			if i == 0 {
				row("  API writes (status, Events included)", func(r *takeOnRun) float64 { return r.api.total() }, num, "", nil)
				row("  log store rows written (the store's count)", func(r *takeOnRun) float64 { return r.storeWrites() }, num, "", nil)
			} else {
				zero("  API writes (status, Events included)", func(r *takeOnRun) float64 { return r.api.total() })
				zero("  log store writes (the store's count)", func(r *takeOnRun) float64 { return r.storeWrites() })
			}
			row("  writes the API server refused with 429 (sent again)", func(r *takeOnRun) float64 { return r.api.refused }, num, "", nil)
			target, rss := "", within(rssRatio)
			if n < idleRSSSize {
				rss = nil
			} else {
				target = fmt.Sprintf("<= %.1fx", rssRatio)
			}
			row("RSS settled (VmRSS)", func(r *takeOnRun) float64 { return float64(r.fp.rssEnd) }, mib, target, rss)
			row("  of which anonymous (RssAnon)", func(r *takeOnRun) float64 { return float64(r.fp.anonEnd) }, mib, "", nil)
			row("  of which the binary's pages (RssFile)", func(r *takeOnRun) float64 { return float64(r.fp.fileEnd) }, mib, "", nil)
			row("    code (.text)", func(r *takeOnRun) float64 { return float64(r.fp.filePages.code) }, mib, "", nil)
			row("    the runtime's function tables (.gopclntab)", func(r *takeOnRun) float64 { return float64(r.fp.filePages.tables) }, mib, "", nil)
			row("    read-only data and the rest", func(r *takeOnRun) float64 { return float64(r.fp.filePages.rest) }, mib, "", nil)
			row("RSS peak since start (VmHWM)", func(r *takeOnRun) float64 { return float64(r.fp.hwm) }, mib, target, rss)
			row("  peak / settled", func(r *takeOnRun) float64 { return peakToSettled(r.fp) }, func(v float64) string { return fmt.Sprintf("%.2fx", v) }, "", nil)
			row("CPU (cores), idle", func(r *takeOnRun) float64 { return r.fp.cores() }, core, "", nil)
		}
	}
}

// idleSizes is the idle phase's session counts, smallest first.
func (r *report) idleSizes() []int { return slices.Sorted(maps.Keys(r.idle)) }

// runsNote names the runs a section's figures are taken over, when there is more than one.
func runsNote(floor, mgr int) string {
	if floor == 1 && mgr == 1 {
		return ""
	}
	return fmt.Sprintf(" (median of %d runs)", min(floor, mgr))
}

// within is a ratio target's check: the manager's figure at most ratio times the floor's.
func within(ratio float64) func(floor, mgr float64) bool {
	return func(floor, mgr float64) bool { return floor > 0 && mgr/floor <= ratio+1e-9 }
}

// printLogStore prints the log store's appends and Tail cost, which have no floor process.
func (r *report) printLogStore(t table) {
	if len(r.appends) > 0 {
		fmt.Fprintf(t.tw, "-- log store, one writer per session, all at once\t\t\t\t\t\n")
		for _, a := range r.appends {
			t.row(fmt.Sprintf("%s appends/s, %d sessions", a.backend, a.n), -1, a.perSecond(), func(v float64) string { return fmt.Sprintf("%.0f/s", v) }, "", nil)
			t.row(fmt.Sprintf("%s append latency p50", a.backend), -1, float64(percentile(a.lat, 0.5)), msf, "", nil)
			t.row(fmt.Sprintf("%s append latency p99", a.backend), -1, float64(percentile(a.lat, 0.99)), msf, "", nil)
		}
	}
	for _, tr := range r.tail {
		ns := func(v float64) string { return fmt.Sprintf("%.1fus", v/1e3) }
		fmt.Fprintf(t.tw, "-- Tail() cost, %s (floor: the 10-event log)\t\t\t\t\t\n", tr.backend)
		t.row("Tail() median at 1,000,000 events", tr.at10, tr.at1M, ns, "<= 1.1x", met(tr.at1M <= 1.1*tr.at10))
		t.row("Tail() median at 10,000 events", tr.at10, tr.at10k, ns, "", nil)
	}
}

// printWebhooks prints the admission latency with and without the webhooks.
func (r *report) printWebhooks(t table) {
	wh := r.webhook
	if wh == nil {
		return
	}
	fmt.Fprintf(t.tw, "-- webhook admission, %d writes each (floor: no webhook registered)\t\t\t\t\t\n", webhookSamples)
	for _, k := range wh.kinds {
		for _, q := range []float64{0.5, 0.99} {
			t.row(fmt.Sprintf("%s p%.0f", k, q*100), float64(percentile(wh.floor[k], q)), float64(percentile(wh.with[k], q)), msf, "", nil)
		}
	}
}

// printRuns prints each run's write split, raw (the table's write rows are medians), and with
// several runs each run's latency ratios.
func (r *report) printRuns(w io.Writer, o opts) {
	raw := func(prefix string, runs map[string][]*stormResult) {
		for _, side := range []string{sideFloor, sideManager} {
			for i, s := range runs[side] {
				fmt.Fprintf(w, "%s/%s run %d: in-turn %+v; idle toggle %+v; idle steps %+v over %d\n", prefix, side, i+1, s.inTurn, s.idleToggle, s.idleStep, s.idleSteps)
			}
		}
	}
	for _, st := range o.stores {
		raw(st, r.storm[st])
	}
	raw("shards "+r.shardStore, r.sharded)
	for _, side := range []string{sideFloor, sideManager} {
		for i, s := range r.sharded[side] {
			if s.benchAfter.rss > 0 {
				fmt.Fprintf(w, "shards %s/%s run %d: this process once the side's agents were closed: %s\n", r.shardStore, side, i+1, s.benchAfter)
			}
		}
	}
	for _, st := range o.stores {
		if fl, mg := r.storm[st][sideFloor], r.storm[st][sideManager]; len(fl) > 1 && len(fl) == len(mg) {
			fmt.Fprintf(w, "%s, run by run (manager/floor of the same run): %s\n", st, pairRatios(fl, mg))
		}
	}
	for _, n := range r.idleSizes() {
		if fl, mg := r.idle[n][sideFloor], r.idle[n][sideManager]; len(fl) > 1 && len(fl) == len(mg) {
			fmt.Fprintf(w, "idle, %d sessions, run by run (manager/floor of the same run): %s\n", n, idlePairRatios(fl, mg))
		}
	}
}

// runFigure is one figure of a run, whose ratio runRatios prints run by run.
type runFigure[T any] struct {
	name string
	f    func(T) float64
}

// runRatios is the ratios of each run, which the medians above hide: on a noisy machine their
// spread says how far one run can be trusted.
func runRatios[T any](fl, mg []T, figs []runFigure[T]) string {
	parts := make([]string, 0, len(figs))
	for _, fig := range figs {
		rs := make([]string, len(mg))
		for i := range mg {
			rs[i] = "-"
			if d := fig.f(fl[i]); d > 0 {
				rs[i] = fmt.Sprintf("%.2fx", fig.f(mg[i])/d)
			}
		}
		parts = append(parts, fig.name+" "+strings.Join(rs, " "))
	}
	return strings.Join(parts, "; ")
}

// pairRatios is the latency ratios of each storm run.
func pairRatios(fl, mg []*stormResult) string {
	return runRatios(fl, mg, []runFigure[*stormResult]{
		{"ack p50", ackAt(0.5)}, {"ack p99", ackAt(0.99)}, {"toggle storm", toggleTime},
	})
}

// idlePairRatios is the start-up and memory ratios of each idle run.
func idlePairRatios(fl, mg []*idleResult) string {
	return runRatios(fl, mg, []runFigure[*idleResult]{
		{"first start", func(r *idleResult) float64 { return float64(r.first.dur) }},
		{"restart", func(r *idleResult) float64 { return float64(r.restart.dur) }},
		{"first start's RSS settled", func(r *idleResult) float64 { return float64(r.first.fp.rssEnd) }},
		{"peak", func(r *idleResult) float64 { return float64(r.first.fp.hwm) }},
		{"restart's RSS settled", func(r *idleResult) float64 { return float64(r.restart.fp.rssEnd) }},
		{"peak", func(r *idleResult) float64 { return float64(r.restart.fp.hwm) }},
	})
}

// printWrites prints every run's writes by kind, in all and per operation: the Events have
// their own column and are in the total.
func (r *report) printWrites(w io.Writer, o opts) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	list := func(label string, runs map[string][]*stormResult) {
		for _, side := range []string{sideFloor, sideManager} {
			for i, s := range runs[side] {
				if !header {
					fmt.Fprintln(tw, "API writes by kind\tside\trun\toperations\tmanager: status\tmanager: other\tagents\tEvents\ttotal\ttotal / operation\t409s among them\t429s refused\t")
					header = true
				}
				for _, ph := range []struct {
					name string
					w    writes
					ops  int
				}{
					{"in-turn toggles", s.inTurn, s.n},
					{"idle toggles", s.idleToggle, s.n},
					{"steps, nothing pending", s.idleStep, s.idleSteps},
				} {
					perOp := "-"
					if ph.ops > 0 {
						perOp = num(ph.w.total() / float64(ph.ops))
					}
					fmt.Fprintf(tw, "%s, %s\t%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%.0f\t%.0f\t\n", label, ph.name, side, i+1, ph.ops,
						ph.w.status, ph.w.other, ph.w.agent, ph.w.events, ph.w.total(), perOp, ph.w.conflicts, ph.w.refused)
				}
			}
		}
	}
	for _, st := range o.stores {
		list(st, r.storm[st])
	}
	if len(r.sharded) > 0 {
		list("shards "+r.shardStore, r.sharded)
	}
	_ = tw.Flush()
}
