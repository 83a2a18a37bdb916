package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/harness-dev/planmode-operator/test/framework/apicount"
)

// controllerName is the name each side's controller registers under, which labels its
// controller-runtime metrics.
func controllerName(side string) string {
	if side == sideFloor {
		return "floor"
	}
	return "agentsession"
}

// takenOn waits until process p has taken every one of the n sessions of ns on, and returns
// the time from its start. The definition is the same for both sides:
//
//   - the process has reconciled every session at least once, by its own /metrics: its
//     controller's controller_runtime_reconcile_total is at least n, and its workqueue is empty
//     with no worker busy. Every session of the informer's initial list is queued before the
//     workers start (controller-runtime waits for the handlers to have seen the list), so an
//     empty queue after n reconciles means each was reconciled;
//   - and every session's status shows it taken on (taken): the manager's config in force
//     and observedGeneration, the floor's observedGeneration.
//
// The time is that of the /metrics read that saw the first condition hold, when the list
// that follows confirms the second; otherwise both are read again. It sets run's dur and
// reconciles, and its firstWrite: the first read that counted a PATCH the process sent (its
// client-go's rest_client_requests_total), which splits the take-on into the start and the
// writes at no cost to the API server.
func (b *bench) takenOn(ctx context.Context, p *proc, side, ns string, n int, run *takeOnRun) error {
	c := `controller="` + controllerName(side) + `"`
	ok := taken(side)
	// Taking a session on is one status write: allow for 20 writes/s at least.
	deadline := time.Now().Add(max(b.o.timeout, time.Duration(n/20)*time.Second))
	var last string
	for {
		m, err := p.scrape(ctx)
		if err != nil {
			return err
		}
		at := time.Since(p.startedAt)
		if run.firstWrite == 0 && sumMetric(m, "rest_client_requests_total", `method="PATCH"`) > 0 {
			run.firstWrite = at
		}
		rec := sumMetric(m, "controller_runtime_reconcile_total", c)
		depth := sumMetric(m, "workqueue_depth", c)
		busy := sumMetric(m, "controller_runtime_active_workers", c)
		last = fmt.Sprintf("%.0f reconciles, queue %.0f, %.0f workers busy", rec, depth, busy)
		if rec >= float64(n) && depth == 0 && busy == 0 {
			done, err := b.countSessions(ctx, ns, ok)
			if err != nil {
				return err
			}
			if done >= n {
				run.dur, run.reconciles = at, rec
				return nil
			}
			last += fmt.Sprintf(", %d of %d statuses taken on", done, n)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d sessions not taken on after %s (%s)", side, n, time.Since(p.startedAt).Round(time.Second), last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(takeOnPoll(at)):
		}
	}
}

// takeOnPoll is the wait before the next /metrics read, at elapsed since the start: 1% of it,
// between 50 and 500 ms. Each read runs every collector of the process under test (the
// manager's session gauges walk every cached session): a fixed 50 ms loaded a 20 s take-on
// with 400 of them, 1% with about 240, and the figure's resolution stays within 1% past 5 s.
func takeOnPoll(elapsed time.Duration) time.Duration {
	return min(500*time.Millisecond, max(50*time.Millisecond, elapsed/100))
}

// storeCounter counts what the SQLite log store holds and what was written to it, read from
// the file itself on a connection of the benchmark's own, so the count does not trust the
// process under test.
type storeCounter struct {
	db   *sql.DB
	conn *sql.Conn // PRAGMA data_version is per connection
}

// storeSnap is what the store holds at one moment.
type storeSnap struct {
	dataVersion            int64
	owners, sessions       int64
	events, headers        int64
	ownersClaimedSinceMark int64
}

func openStoreCounter(ctx context.Context, path string) (*storeCounter, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &storeCounter{db: db, conn: conn}, nil
}

func (c *storeCounter) close() {
	_ = c.conn.Close()
	_ = c.db.Close()
}

// snap reads the store's row counts, its data_version (which moves when another connection
// commits a change) and how many owner records were written (claimed_at) since mark.
func (c *storeCounter) snap(ctx context.Context, mark time.Time) (storeSnap, error) {
	var s storeSnap
	q := []struct {
		sql  string
		args []any
		into *int64
	}{
		{"PRAGMA data_version", nil, &s.dataVersion},
		{"SELECT count(*) FROM session_owners", nil, &s.owners},
		{"SELECT count(*) FROM sessions", nil, &s.sessions},
		{"SELECT count(*) FROM events", nil, &s.events},
		{"SELECT count(*) FROM session_headers", nil, &s.headers},
		{"SELECT count(*) FROM session_owners WHERE claimed_at >= ?", []any{mark.UnixMilli()}, &s.ownersClaimedSinceMark},
	}
	for _, x := range q {
		if err := c.conn.QueryRowContext(ctx, x.sql, x.args...).Scan(x.into); err != nil {
			return s, fmt.Errorf("count the log store (%s): %w", x.sql, err)
		}
	}
	return s, nil
}

// rowsWritten is the rows written between a and b (b's owner records claimed since its mark,
// inserted or re-recorded, and the rows added to the other tables), and whether anything was
// committed at all (data_version, when a was read on the same connection).
func rowsWritten(a, b storeSnap) (int64, bool) {
	n := b.ownersClaimedSinceMark + (b.sessions - a.sessions) + (b.events - a.events) + (b.headers - a.headers)
	return n, b.dataVersion != a.dataVersion
}

// takeOnRun is one start of a side's process on n idle sessions.
type takeOnRun struct {
	quietWait  time.Duration // before the start: until kube-apiserver and etcd were quiet (awaitQuietControlPlane)
	dur        time.Duration // start -> every session taken on
	ready      time.Duration // start -> /readyz
	firstWrite time.Duration // start -> the first /metrics read that counted a PATCH the process sent; 0 when none
	cpu        time.Duration // the process's CPU time from its start until every session was taken on (read just after)
	apiCPU     time.Duration // kube-apiserver's CPU time over the same span
	etcdCPU    time.Duration // etcd's CPU time over the same span
	reconciles float64       // the process's reconciles by then
	api        writes        // the process's API writes from its start until quiet
	storeRows  int64         // rows the process wrote to the log store (the store's own count)
	storeDirty bool          // the store's data_version moved (restart: any commit at all)
	fp         footprint
}

// storeWrites is the store writes of the run as the store counts them: the rows written, or
// 1 when none was but something was committed.
func (t takeOnRun) storeWrites() float64 {
	if t.storeRows == 0 && t.storeDirty {
		return 1
	}
	return float64(t.storeRows)
}

// idleResult is a side's start-up and footprint with n idle sessions (no agents): a first
// start on fresh sessions and a fresh store, then a restart on the same ones.
type idleResult struct {
	n              int
	first, restart takeOnRun
}

// idle measures the side's process with n idle sessions of its own (created for it, deleted
// afterwards): a first start on a fresh SQLite store, then, after a graceful stop, a restart
// on the same store and sessions (start).
func (b *bench) idle(ctx context.Context, side string, n int) (*idleResult, error) {
	ns, _, err := b.createSessions(ctx, "idle-"+side, n, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = b.deleteSessions(context.WithoutCancel(ctx), ns, max(b.o.timeout, time.Duration(n)*60*time.Millisecond))
	}()
	b.quiesce(ctx)
	url, err := b.storeURL(ctx, storeSQLite)
	if err != nil {
		return nil, err
	}
	r := &idleResult{n: n}
	var sc *storeCounter
	defer func() {
		if sc != nil {
			sc.close()
		}
	}()
	for i, run := range []*takeOnRun{&r.first, &r.restart} {
		if err := b.start(ctx, side, url, ns, n, i, &sc, run); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// start is the i-th start (0 first, 1 restart) of the side's process on the n sessions of ns
// and the store at url: time to take every session on (takenOn), the API and store writes
// until quiet, then RSS and CPU once the process has settled; it stops the process
// gracefully. *sc counts the store, opened once the store exists.
func (b *bench) start(ctx context.Context, side, url, ns string, n, i int, sc **storeCounter, run *takeOnRun) error {
	var err error
	if run.quietWait, err = b.awaitQuietControlPlane(ctx); err != nil {
		return err
	}
	noAgents := apicount.New()
	w0, err := b.snapWrites(ctx, noAgents)
	if err != nil {
		return err
	}
	var s0 storeSnap // the first start's store is empty
	mark := time.Now()
	if *sc != nil {
		if s0, err = (*sc).snap(ctx, mark); err != nil {
			return err
		}
	}
	api0, etcd0, err := b.controlPlaneCPU()
	if err != nil {
		return err
	}
	p, err := b.startProc(ctx, procOpts{side: side, store: url})
	if err != nil {
		return err
	}
	defer p.stop()
	run.ready = p.ready
	cpuProfile, apiProfile := b.takeOnProfiles(ctx, p, side, n, i)
	if err = b.takenOn(ctx, p, side, ns, n, run); err != nil {
		return err
	}
	run.cpu = p.cpu()
	if run.apiCPU, run.etcdCPU, err = b.controlPlaneCPU(); err != nil {
		return err
	}
	run.apiCPU -= api0
	run.etcdCPU -= etcd0
	logPhase("  %s, %d sessions, %s: every session taken on after %s (%.0f reconciles; the control plane quiet %s before the start)",
		side, n, []string{"first start", "restart"}[i], run.dur.Round(time.Millisecond), run.reconciles, run.quietWait.Round(time.Millisecond))
	b.quiesce(ctx)
	if run.api, err = b.since(ctx, w0, noAgents); err != nil {
		return err
	}
	if err := <-cpuProfile; err != nil {
		return err
	}
	if err := <-apiProfile; err != nil {
		return err
	}
	run.fp = p.idleFootprint(5 * time.Second)
	if side == sideManager {
		if err := p.profile(b.o.profileDir, "heap?gc=1", fmt.Sprintf("heap-idle-%d-%d.pprof", n, i)); err != nil {
			return err
		}
	}
	if *sc == nil {
		if *sc, err = openStoreCounter(ctx, strings.TrimPrefix(url, "sqlite://")); err != nil {
			return err
		}
	}
	s1, err := (*sc).snap(ctx, mark)
	if err != nil {
		return err
	}
	run.storeRows, run.storeDirty = rowsWritten(s0, s1)
	if i == 0 {
		run.storeDirty = false // no earlier reading on this connection
	}
	return nil
}

// takeOnProfiles starts, with -profile-dir, the CPU profiles of the i-th take-on of n sessions:
// the manager's and the API server's. Each channel reports when its profile is written.
func (b *bench) takeOnProfiles(ctx context.Context, p *proc, side string, n, i int) (cpu, api <-chan error) {
	cpuProfile := make(chan error, 1)
	if side == sideManager && b.o.profileDir != "" {
		// The take-on's CPU: as long as it lasts at 500 sessions/s, 2 to 30 s.
		secs := min(30, max(2, n/500))
		go func() {
			cpuProfile <- p.profile(b.o.profileDir, fmt.Sprintf("profile?seconds=%d", secs), fmt.Sprintf("cpu-takeon-%d-%d.pprof", n, i))
		}()
	} else {
		cpuProfile <- nil
	}
	apiProfile := make(chan error, 1)
	if b.o.profileDir != "" {
		// The API server's side of either take-on, over its first second per 1,000 sessions
		// (at most 10): a first start outlasts it, a restart falls within it. Where the API
		// server's time per status write, or per session listed, goes.
		window := time.Duration(min(10, max(1, n/1000))) * time.Second
		go func() {
			apiProfile <- apiServerProfile(ctx, b.cfg, window, b.o.profileDir, fmt.Sprintf("apiserver-takeon-%s-%d-%d.pprof", side, n, i))
		}()
	} else {
		apiProfile <- nil
	}
	return cpuProfile, apiProfile
}
