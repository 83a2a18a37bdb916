package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/test/framework/apicount"
)

var model = harness.LLMCallConfig{Provider: "reference", Model: "bench"}

// step runs one step through the SDK the way the reference agent does. With lat set, the
// boundary must ask the manager, and its duration is stored.
func (b *bench) step(ctx context.Context, ss *session, turn, step int64, lat *time.Duration) error {
	start := time.Now()
	res, err := ss.agent.Boundary(ctx, turn, step, b.o.timeout)
	d := time.Since(start)
	if err != nil {
		return err
	}
	if lat != nil {
		if !res.Asked {
			return fmt.Errorf("session %s turn %d step %d: the boundary did not ask the manager although a selection was pending", ss.name, turn, step)
		}
		*lat = d
	}
	var msgs []harness.Event
	if step == 1 {
		msgs = append(msgs, agentsdk.UserText("task"))
	}
	hdr := refagent.Header(res, model, refagent.DefaultSystem)
	if err := ss.agent.StartStep(ctx, res, agentsdk.StepInput{Messages: msgs, Header: &hdr}); err != nil {
		return err
	}
	return ss.agent.EndStep(ctx, turn, step)
}

// toggle is the user's selection (its writes are counted apart).
func (b *bench) toggle(ctx context.Context, ns, name string, active bool) error {
	obj := &v1alpha1.AgentSession{}
	obj.Namespace, obj.Name = ns, name
	body := fmt.Sprintf(`{"spec":{"planMode":{"active":%t}}}`, active)
	return b.user.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(body)))
}

func parallel(sessions []*session, f func(*session) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	for i, ss := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(ss)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// quiesce waits until no client has written for 300ms (at most 10s), so trailing writes (an
// Event after a commit, a retried status patch) are charged to the phase that caused them.
func quiesce(counters ...*apicount.Counter) {
	sum := func() (n int64) {
		for _, c := range counters {
			n += c.Writes()
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	last, since := sum(), time.Now()
	for time.Now().Before(deadline) && time.Since(since) < 300*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if n := sum(); n != last {
			last, since = n, time.Now()
		}
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	idx := int(p*float64(len(s)-1) + 0.5)
	return s[idx]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func per(n int64, d int) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(d))
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// report prints the side-by-side table: rows are metrics, columns the sides and the ratio.
func report(w io.Writer, o opts, results map[string]map[int]*result) error {
	names := []string{}
	for _, s := range sides() {
		if results[s.name] != nil {
			names = append(names, s.name)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "metric\t" + names[0] + "\t"
	for _, n := range names[1:] {
		head += n + "\tratio\ttarget\t"
	}
	fmt.Fprintln(tw, head)
	// row prints the floor's value, then for every other side its value, its ratio to the floor
	// and, where the metric has a target, whether that side meets it.
	row := func(label string, vals []float64, format func(float64) string, target string, ok func(floor, v float64) bool) {
		line := label + "\t" + format(vals[0]) + "\t"
		for _, v := range vals[1:] {
			t := target
			if ok != nil {
				if ok(vals[0], v) {
					t += " ok"
				} else {
					t += " MISS"
				}
			}
			line += format(v) + "\t" + ratio(v, vals[0]) + "\t" + t + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	atMost := func(limit float64) func(float64, float64) bool {
		return func(_, v float64) bool { return v <= limit+1e-9 }
	}
	msf := func(v float64) string { return ms(time.Duration(v)) }
	num := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	wall := func(v float64) string { return time.Duration(v).Round(time.Millisecond).String() }
	for _, n := range o.sessions {
		// col is one figure of every side's run with n sessions, in the order of names.
		col := func(f func(r *result) float64) []float64 {
			vals := make([]float64, 0, len(names))
			for _, name := range names {
				vals = append(vals, f(results[name][n]))
			}
			return vals
		}
		// perToggle and perBetween are a count of writes per toggle during a turn and between turns.
		perToggle := func(f func(writes) int64) []float64 {
			return col(func(r *result) float64 { return float64(f(r.toggleWrites)) / float64(r.toggles) })
		}
		perBetween := func(f func(writes) int64) []float64 {
			return col(func(r *result) float64 { return float64(f(r.betweenW)) / float64(r.betweenTogs) })
		}
		fmt.Fprintf(tw, "-- %d concurrent session(s)\t\n", n)
		row("ack latency median", col(func(r *result) float64 { return float64(percentile(r.latencies, 0.5)) }), msf,
			"<= 1.5x", func(floor, v float64) bool { return v <= 1.5*floor })
		row("ack latency p99", col(func(r *result) float64 { return float64(percentile(r.latencies, 0.99)) }), msf, "", nil)
		row("acked boundaries (samples)", col(func(r *result) float64 { return float64(len(r.latencies)) }), count, "", nil)
		row("API writes / toggle, during a turn, Events included", perToggle(writes.total), num, "<= 3", atMost(3))
		row("  writes but Events", perToggle(writes.butEvents), num, "<= 3", atMost(3))
		row("    of which the agent's", perToggle(func(w writes) int64 { return w.agent }), num, "", nil)
		row("  Event writes", perToggle(func(w writes) int64 { return w.events }), num, "", nil)
		row("API writes / toggle, between turns, Events included", perBetween(writes.total), num, "<= 2", atMost(2))
		row("  writes but Events", perBetween(writes.butEvents), num, "<= 1", atMost(1))
		row("  Event writes", perBetween(func(w writes) int64 { return w.events }), num, "", nil)
		row("API writes / step, nothing pending, Events included",
			col(func(r *result) float64 { return float64(r.idleWrites.total()) / float64(r.idleSteps) }), num, "0", atMost(0))
		row("agent API reads / step, nothing pending",
			col(func(r *result) float64 { return float64(r.idleReads) / float64(r.idleReadSteps) }), num, "", nil)
		row("phase wall time", col(func(r *result) float64 { return float64(r.elapsed) }), wall, "", nil)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return writesTable(w, o, names, results)
}

// writesTable prints every phase's writes by kind, in all and per operation: the Events have
// their own column and are in the total.
func writesTable(w io.Writer, o opts, names []string, results map[string]map[int]*result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "API writes by kind\tsessions\tside\toperations\tmanager: AgentSessions\tmanager: other\tagents\tEvents\ttotal\ttotal / operation\t409s among them\t")
	for _, n := range o.sessions {
		for _, name := range names {
			r := results[name][n]
			for _, ph := range []struct {
				label string
				w     writes
				ops   int
			}{
				{"toggles during a turn", r.toggleWrites, r.toggles},
				{"toggles between turns", r.betweenW, r.betweenTogs},
				{"steps, nothing pending", r.idleWrites, r.idleSteps},
			} {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", ph.label, n, name, ph.ops,
					ph.w.manager, ph.w.other, ph.w.agent, ph.w.events, ph.w.total(), per(ph.w.total(), ph.ops), ph.w.conflicts)
			}
		}
	}
	return tw.Flush()
}
