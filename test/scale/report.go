package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

type report struct {
	storm      map[string]map[string][]*stormResult // store -> side -> runs
	idle       map[string]*idleResult
	appends    []appendResult
	tail       []tailResult
	webhook    *webhookResult
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
func med(runs []*stormResult, f func(*stormResult) float64) float64 {
	v := make([]float64, 0, len(runs))
	for _, r := range runs {
		v = append(v, f(r))
	}
	return median(v)
}

func msf(v float64) string  { return fmt.Sprintf("%.2fms", v/1e6) }
func sec(v float64) string  { return time.Duration(v).Round(time.Millisecond).String() }
func num(v float64) string  { return fmt.Sprintf("%.2f", v) }
func byt(v float64) string  { return fmt.Sprintf("%.0fB", v) }
func mib(v float64) string  { return fmt.Sprintf("%.1fMiB", v/(1<<20)) }
func core(v float64) string { return fmt.Sprintf("%.2f", v) }

func (r *report) print(w io.Writer, o opts) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "figure\tfloor\tmanager\tratio\ttarget\t")
	row := func(label string, floor, mgr float64, f func(float64) string, target string, ok *bool) {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", label, fl, f(mgr), ratio, target)
	}
	b := func(v bool) *bool { return &v }
	// per(get, part, div) is a count of one phase of a run per div of it.
	per := func(get func(*stormResult) writes, part func(writes) float64, div func(*stormResult) int) func(*stormResult) float64 {
		return func(s *stormResult) float64 { return part(get(s)) / float64(div(s)) }
	}
	tot := func(w writes) float64 { return w.total() }
	noEv := func(w writes) float64 { return w.butEvents() }
	nn := func(s *stormResult) int { return s.n }
	in := func(s *stormResult) writes { return s.inTurn }
	it := func(s *stormResult) writes { return s.idleToggle }
	is := func(s *stormResult) writes { return s.idleStep }
	ni := func(s *stormResult) int { return s.idleSteps }
	for _, st := range o.stores {
		runs := r.storm[st]
		if runs == nil {
			continue
		}
		fl, mg := runs["floor"], runs["manager"]
		if len(fl) == 0 || len(mg) == 0 {
			continue
		}
		n := mg[0].n
		shape := ""
		if o.floorShape == "manager" {
			shape = ", floor storing the manager's status shape"
		}
		fmt.Fprintf(tw, "-- storms, %d sessions, %s log (median of %d run(s))%s\t\t\t\t\t\n", n, st, len(mg), shape)
		f50, m50 := med(fl, ackAt(0.5)), med(mg, ackAt(0.5))
		f99, m99 := med(fl, ackAt(0.99)), med(mg, ackAt(0.99))
		row("boundary storm: ack latency p50", f50, m50, msf, "<= 1.2x", b(m50 <= 1.2*f50))
		row("boundary storm: ack latency p99", f99, m99, msf, "<= 1.5x", b(m99 <= 1.5*f99))
		wall := func(s *stormResult) float64 { return float64(s.ackWall) }
		row("boundary storm: release -> last ack", med(fl, wall), med(mg, wall), sec, "", nil)
		fc, mc := med(fl, toggleTime), med(mg, toggleTime)
		row("toggle storm: every status committed", fc, mc, sec, "<= 1.3x", b(mc <= 1.3*fc))
		ev := func(w writes) float64 { return w.events }
		ag := func(w writes) float64 { return w.agent }
		row("API writes / in-turn toggle, Events included", med(fl, per(in, tot, nn)), med(mg, per(in, tot, nn)), num, "", nil)
		v := med(mg, per(in, noEv, nn))
		row("  writes but Events", med(fl, per(in, noEv, nn)), v, num, "<= 3", b(v <= 3+1e-9))
		row("    of which the agent's", med(fl, per(in, ag, nn)), med(mg, per(in, ag, nn)), num, "", nil)
		row("  Events", med(fl, per(in, ev, nn)), med(mg, per(in, ev, nn)), num, "", nil)
		row("API writes / idle toggle, Events included", med(fl, per(it, tot, nn)), med(mg, per(it, tot, nn)), num, "", nil)
		v = med(mg, per(it, noEv, nn))
		row("  writes but Events", med(fl, per(it, noEv, nn)), v, num, "<= 1", b(v <= 1+1e-9))
		row("  Events", med(fl, per(it, ev, nn)), med(mg, per(it, ev, nn)), num, "", nil)
		cf := func(w writes) float64 { return w.conflicts }
		row("409 conflicts / in-turn toggle (in the writes)", med(fl, per(in, cf, nn)), med(mg, per(in, cf, nn)), num, "", nil)
		row("409 conflicts / idle toggle (in the writes)", med(fl, per(it, cf, nn)), med(mg, per(it, cf, nn)), num, "", nil)
		refused := func(w writes) float64 { return w.refused }
		row("429 refused (not in the writes) / in-turn toggle", med(fl, per(in, refused, nn)), med(mg, per(in, refused, nn)), num, "", nil)
		row("429 refused (not in the writes) / idle toggle", med(fl, per(it, refused, nn)), med(mg, per(it, refused, nn)), num, "", nil)
		serve := func(get func(*stormResult) writes) func(*stormResult) float64 {
			return func(s *stormResult) float64 { return get(s).statusServeTime() }
		}
		row("API server time / status write, in-turn toggles", med(fl, serve(in)), med(mg, serve(in)), msf, "", nil)
		row("API server time / status write, idle toggles", med(fl, serve(it)), med(mg, serve(it)), msf, "", nil)
		apiCPU := func(get func(*stormResult) time.Duration) func(*stormResult) float64 {
			return func(s *stormResult) float64 { return float64(get(s)) / float64(s.n) }
		}
		row("API server CPU / session, boundary storm", med(fl, apiCPU(func(s *stormResult) time.Duration { return s.apiCPUBoundary })),
			med(mg, apiCPU(func(s *stormResult) time.Duration { return s.apiCPUBoundary })), msf, "", nil)
		row("API server CPU / session, toggle storm", med(fl, apiCPU(func(s *stormResult) time.Duration { return s.apiCPUToggle })),
			med(mg, apiCPU(func(s *stormResult) time.Duration { return s.apiCPUToggle })), msf, "", nil)
		row("session object after the boundary storm (bytes, JSON)", med(fl, func(s *stormResult) float64 { return s.objBytes }),
			med(mg, func(s *stormResult) float64 { return s.objBytes }), byt, "", nil)
		term := func(w writes) float64 { return w.terminated }
		one := func(*stormResult) int { return 1 }
		row("watchers closed by the API server (too slow), in-turn", med(fl, per(in, term, one)), med(mg, per(in, term, one)), num, "", nil)
		row("watchers closed by the API server (too slow), idle", med(fl, per(it, term, one)), med(mg, per(it, term, one)), num, "", nil)
		watches := func(w writes) float64 { return w.watches }
		row("watches started (agents' re-watches), in-turn", med(fl, per(in, watches, one)), med(mg, per(in, watches, one)), num, "", nil)
		row("watches started (agents' re-watches), idle", med(fl, per(it, watches, one)), med(mg, per(it, watches, one)), num, "", nil)
		v = med(mg, per(is, tot, ni))
		row("API writes / step, nothing pending, Events included", med(fl, per(is, tot, ni)), v, num, "0", b(v == 0))
		take := func(s *stormResult) float64 { return float64(s.takeOn) }
		row("start -> every session taken on", med(fl, take), med(mg, take), sec, "", nil)
		kib := func(v float64) string { return fmt.Sprintf("%.0f KiB", v/1024) }
		row("agents (this process): heap and stacks / agent", med(fl, func(s *stormResult) float64 { return s.agentBytes }),
			med(mg, func(s *stormResult) float64 { return s.agentBytes }), kib, "", nil)
		row("agents (this process): goroutines / agent", med(fl, func(s *stormResult) float64 { return s.agentGoroutines }),
			med(mg, func(s *stormResult) float64 { return s.agentGoroutines }), num, "", nil)
		rss := func(f func(*stormResult) footprint) func(*stormResult) float64 {
			return func(s *stormResult) float64 { return float64(f(s).rssPeak) }
		}
		cpu := func(f func(*stormResult) footprint) func(*stormResult) float64 {
			return func(s *stormResult) float64 { return f(s).cores() }
		}
		idle := func(s *stormResult) footprint { return s.fpIdle }
		bs := func(s *stormResult) footprint { return s.fpBoundary }
		ts := func(s *stormResult) footprint { return s.fpToggle }
		row(fmt.Sprintf("RSS, %d sessions idle", n), med(fl, rss(idle)), med(mg, rss(idle)), mib, "", nil)
		anon := func(s *stormResult) float64 { return float64(s.fpIdle.anonEnd) }
		row("  of which anonymous (RssAnon)", med(fl, anon), med(mg, anon), mib, "", nil)
		row("RSS peak, boundary storm", med(fl, rss(bs)), med(mg, rss(bs)), mib, "", nil)
		row("RSS peak, toggle storm", med(fl, rss(ts)), med(mg, rss(ts)), mib, "", nil)
		row(fmt.Sprintf("CPU (cores), %d sessions idle", n), med(fl, cpu(idle)), med(mg, cpu(idle)), core, "", nil)
		row("CPU (cores), boundary storm", med(fl, cpu(bs)), med(mg, cpu(bs)), core, "", nil)
		row("CPU (cores), toggle storm", med(fl, cpu(ts)), med(mg, cpu(ts)), core, "", nil)
	}
	if fl, mg := r.sharded["floor"], r.sharded["manager"]; len(fl) > 0 && len(mg) > 0 {
		fmt.Fprintf(tw, "-- %d shards on one control plane, %d sessions in all, %s log (floor: %d floor processes with the same selectors; median of %d run(s))\t\t\t\t\t\n",
			mg[0].shardCnt, mg[0].n, r.shardStore, fl[0].shardCnt, len(mg))
		for k := 0; k < mg[0].shardCnt; k++ {
			name := fmt.Sprintf("shard %s: ", shardName(k))
			ack := func(q float64) func(*stormResult) float64 {
				return func(s *stormResult) float64 { return float64(percentile(s.shardAcks(k), q)) }
			}
			f50, m50 := med(fl, ack(0.5)), med(mg, ack(0.5))
			f99, m99 := med(fl, ack(0.99)), med(mg, ack(0.99))
			row(name+"ack latency p50", f50, m50, msf, "<= 1.2x", b(m50 <= 1.2*f50))
			row(name+"ack latency p99", f99, m99, msf, "<= 1.5x", b(m99 <= 1.5*f99))
			conv := func(s *stormResult) float64 { return float64(s.shardCommitted(k)) }
			fc, mc := med(fl, conv), med(mg, conv)
			row(name+"toggle storm committed", fc, mc, sec, "<= 1.3x", b(mc <= 1.3*fc))
			rssIdle := func(s *stormResult) float64 { return float64(s.shardFP[k][0].rssEnd) }
			row(name+"RSS idle", med(fl, rssIdle), med(mg, rssIdle), mib, "", nil)
			rssPeak := func(s *stormResult) float64 { return float64(max(s.shardFP[k][1].rssPeak, s.shardFP[k][2].rssPeak)) }
			row(name+"RSS peak, storms", med(fl, rssPeak), med(mg, rssPeak), mib, "", nil)
			cores := func(which int) func(*stormResult) float64 {
				return func(s *stormResult) float64 { return s.shardFP[k][which].cores() }
			}
			row(name+"CPU (cores), boundary storm", med(fl, cores(1)), med(mg, cores(1)), core, "", nil)
			row(name+"CPU (cores), toggle storm", med(fl, cores(2)), med(mg, cores(2)), core, "", nil)
		}
		row("all shards: API writes / in-turn toggle, Events included", med(fl, per(in, tot, nn)), med(mg, per(in, tot, nn)), num, "", nil)
		v := med(mg, per(in, noEv, nn))
		row("all shards: writes but Events / in-turn toggle", med(fl, per(in, noEv, nn)), v, num, "<= 3", b(v <= 3+1e-9))
		row("all shards: API writes / idle toggle, Events included", med(fl, per(it, tot, nn)), med(mg, per(it, tot, nn)), num, "", nil)
		v = med(mg, per(it, noEv, nn))
		row("all shards: writes but Events / idle toggle", med(fl, per(it, noEv, nn)), v, num, "<= 1", b(v <= 1+1e-9))
		v = med(mg, per(is, tot, ni))
		row("all shards: API writes / idle step, Events included", med(fl, per(is, tot, ni)), v, num, "0", b(v == 0))
	}
	if fl, mg := r.idle["floor"], r.idle["manager"]; fl != nil && mg != nil {
		fmt.Fprintf(tw, "-- %d idle sessions, no agents (SQLite log)\t\t\t\t\t\n", mg.n)
		row("start -> every session taken on", float64(fl.takeOn), float64(mg.takeOn), sec, "", nil)
		row("RSS settled (VmRSS)", float64(fl.fp.rssEnd), float64(mg.fp.rssEnd), mib, "< 64MiB", b(mg.n < 10000 || mg.fp.rssEnd < 64<<20))
		row("  of which anonymous (RssAnon)", float64(fl.fp.anonEnd), float64(mg.fp.anonEnd), mib, "", nil)
		row("RSS peak since start (VmHWM)", float64(fl.fp.hwm), float64(mg.fp.hwm), mib, "", nil)
		peakToSettled := func(f footprint) float64 {
			if f.rssEnd == 0 {
				return 0
			}
			return float64(f.hwm) / float64(f.rssEnd)
		}
		row("  peak / settled", peakToSettled(fl.fp), peakToSettled(mg.fp), func(v float64) string { return fmt.Sprintf("%.2fx", v) }, "", nil)
		row("CPU (cores), idle", fl.fp.cores(), mg.fp.cores(), core, "", nil)
	}
	if len(r.appends) > 0 {
		fmt.Fprintf(tw, "-- log store, one writer per session, all at once\t\t\t\t\t\n")
		for _, a := range r.appends {
			row(fmt.Sprintf("%s appends/s, %d sessions", a.backend, a.n), -1, a.perSecond(), func(v float64) string { return fmt.Sprintf("%.0f/s", v) }, "", nil)
			row(fmt.Sprintf("%s append latency p50", a.backend), -1, float64(percentile(a.lat, 0.5)), msf, "", nil)
			row(fmt.Sprintf("%s append latency p99", a.backend), -1, float64(percentile(a.lat, 0.99)), msf, "", nil)
		}
	}
	for _, t := range r.tail {
		ns := func(v float64) string { return fmt.Sprintf("%.1fus", v/1e3) }
		fmt.Fprintf(tw, "-- Tail() cost, %s (floor: the 10-event log)\t\t\t\t\t\n", t.backend)
		row("Tail() median at 1,000,000 events", t.at10, t.at1M, ns, "<= 1.1x", b(t.at1M <= 1.1*t.at10))
		row("Tail() median at 10,000 events", t.at10, t.at10k, ns, "", nil)
	}
	if wh := r.webhook; wh != nil {
		fmt.Fprintf(tw, "-- webhook admission, %d writes each (floor: no webhook registered)\t\t\t\t\t\n", webhookSamples)
		for _, k := range wh.kinds {
			for _, q := range []float64{0.5, 0.99} {
				row(fmt.Sprintf("%s p%.0f", k, q*100), float64(percentile(wh.floor[k], q)), float64(percentile(wh.with[k], q)), msf, "", nil)
			}
		}
	}
	_ = tw.Flush()
	r.printWrites(w, o)
	// Each run's write split, raw: the table's write rows are medians.
	raw := func(prefix string, runs map[string][]*stormResult) {
		for _, side := range []string{"floor", "manager"} {
			for i, s := range runs[side] {
				fmt.Fprintf(w, "%s/%s run %d: in-turn %+v; idle toggle %+v; idle steps %+v over %d\n", prefix, side, i+1, s.inTurn, s.idleToggle, s.idleStep, s.idleSteps)
			}
		}
	}
	for _, st := range o.stores {
		raw(st, r.storm[st])
	}
	raw("shards "+r.shardStore, r.sharded)
	for _, st := range o.stores {
		if fl, mg := r.storm[st]["floor"], r.storm[st]["manager"]; len(fl) > 1 && len(fl) == len(mg) {
			fmt.Fprintf(w, "%s, run by run (manager/floor of the same run): %s\n", st, pairRatios(fl, mg))
		}
	}
}

// pairRatios is the latency ratios of each run, which the medians above hide: on a noisy
// machine their spread says how far one run can be trusted.
func pairRatios(fl, mg []*stormResult) string {
	figs := []struct {
		name string
		f    func(*stormResult) float64
	}{
		{"ack p50", ackAt(0.5)}, {"ack p99", ackAt(0.99)}, {"toggle storm", toggleTime},
	}
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

// printWrites prints every run's writes by kind, in all and per operation: the Events have
// their own column and are in the total.
func (r *report) printWrites(w io.Writer, o opts) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	list := func(label string, runs map[string][]*stormResult) {
		for _, side := range []string{"floor", "manager"} {
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
