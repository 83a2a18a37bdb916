package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/harness-dev/planmode-operator/internal/freeport"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// proc is a manager (or floor) process under test.
type proc struct {
	name      string
	cmd       *exec.Cmd
	logPath   string
	probe     string // host:port of /readyz
	pprof     string // host:port of /debug/pprof ("" when off)
	metrics   string // host:port of /metrics (plain HTTP, loopback)
	done      chan struct{}
	exitErr   error
	startedAt time.Time
	ready     time.Duration // start -> /readyz answered OK
}

type procOpts struct {
	side    string // manager or floor
	store   string // log store URL
	shard   string // --shard-selector
	webhook []string
	extra   []string
	profile bool
}

// startProc starts the side's binary against the envtest control plane and waits for /readyz.
func (b *bench) startProc(ctx context.Context, o procOpts) (*proc, error) {
	port, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	b.seq++
	p := &proc{name: o.side, probe: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{}),
		logPath: filepath.Join(b.o.tmp, fmt.Sprintf("%s-%d.log", o.side, b.seq))}
	args := []string{
		"--log-store=" + o.store,
		"--health-probe-bind-address=" + p.probe,
		fmt.Sprintf("--max-concurrent-reconciles=%d", b.o.workers),
	}
	if o.profile || b.o.profileDir != "" {
		pp, err := freeport.Pick()
		if err != nil {
			return nil, err
		}
		p.pprof = fmt.Sprintf("127.0.0.1:%d", pp)
		args = append(args, "--pprof-bind-address="+p.pprof)
	}
	if o.shard != "" {
		args = append(args, "--shard-selector="+o.shard)
	}
	// Both sides serve /metrics on loopback, plain HTTP: the bench reads each process's own
	// controller-runtime counters (takenOn).
	mp, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	p.metrics = fmt.Sprintf("127.0.0.1:%d", mp)
	args = append(args, "--metrics-bind-address="+p.metrics)
	if o.side == sideFloor {
		args = append(args, "--status-shape="+b.o.floorShape)
	}
	if o.side == sideManager {
		// As deployed (events on, default pending poll), no leader election (one replica).
		args = append(args, "--metrics-secure=false", "--graceful-shutdown-timeout=5s")
		if len(o.webhook) == 0 {
			args = append(args, "--webhook-port=-1")
		}
		args = append(args, o.webhook...)
		args = append(args, b.o.managerArgs...)
	}
	args = append(args, o.extra...)
	p.cmd = exec.Command(b.bins[o.side], args...)
	p.cmd.Env = append(append(os.Environ(), "KUBECONFIG="+b.kubeconfig), b.o.procEnv...)
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	p.startedAt = time.Now()
	go func() {
		p.exitErr = p.cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	if err := p.waitReady(ctx, b.o.timeout); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitReady waits until the process answers /readyz, and records when, and then until its
// metrics server accepts connections: it binds its port when it starts, beside the health
// probes whose port is bound before, so /readyz can answer first, and the benchmark reads
// /metrics next.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start (%v): %s", p.name, p.exitErr, p.tailLog())
		default:
		}
		if p.ready == 0 {
			resp, err := http.Get("http://" + p.probe + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					p.ready = time.Since(p.startedAt)
				}
			}
		}
		if p.ready > 0 {
			if c, err := net.DialTimeout("tcp", p.metrics, time.Second); err == nil {
				return c.Close()
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %s", p.name, timeout, p.tailLog())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *proc) tailLog() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stop sends SIGTERM and waits (SIGKILL after 15s).
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// scrape reads the process's /metrics: every sample by its name with its labels as printed
// (name{k="v",...}).
func (p *proc) scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	// Uncompressed: the benchmark reads /metrics several times a second while it waits, far
	// more often than any scraper; compressing each answer cost the process under test more CPU
	// than the reading itself, and more on the side with the larger endpoint.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		select {
		case <-p.done:
			return nil, fmt.Errorf("read %s's /metrics: %w; it exited (%v): %s", p.name, err, p.exitErr, p.tailLog())
		default:
		}
		return nil, fmt.Errorf("read %s's /metrics: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s's /metrics: %s", p.name, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			continue
		}
		out[l[:i]] = v
	}
	return out, sc.Err()
}

// sumMetric is the sum of the samples of metric name whose labels include every one of want
// (such as `controller="floor"`).
func sumMetric(m map[string]float64, name string, want ...string) float64 {
	var t float64
	for k, v := range m {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(labels, w) {
				ok = false
				break
			}
		}
		if ok {
			t += v
		}
	}
	return t
}

// rssBytes is VmRSS of the process.
func (p *proc) rssBytes() int64 { return p.status("VmRSS:") }

// anonBytes is RssAnon: VmRSS without the file-backed pages (the binary's text and read-only
// data, which the kernel maps in by fault-around and can drop at any time).
func (p *proc) anonBytes() int64 { return p.status("RssAnon:") }

// fileBytes is RssFile: the file-backed pages mapped in, here the binary's own (both sides are
// static binaries), as many as its code and read-only data the process has touched.
func (p *proc) fileBytes() int64 { return p.status("RssFile:") }

func (p *proc) status(field string) int64 { return procStatus(p.cmd.Process.Pid, field) }

// procStatus is a field of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := s.Text(); strings.HasPrefix(l, field) {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpu is the process's user+system CPU time so far.
func (p *proc) cpu() time.Duration { return framework.ProcessCPU(p.cmd.Process.Pid) }

// footprint is the process's RSS (peak of the samples) and CPU use over a window.
type footprint struct {
	rssPeak int64
	rssEnd  int64
	anonEnd int64
	fileEnd int64
	// fileEnd by what the pages hold (binaryPages); zero where /proc/<pid>/pagemap cannot
	// be read.
	filePages binaryPageSplit
	// hwm is VmHWM at the window's end: the process's peak RSS since it started, which the
	// samples can miss.
	hwm  int64
	cpu  time.Duration
	wall time.Duration
}

// cores is the average number of cores busy over the window.
func (f footprint) cores() float64 {
	if f.wall == 0 {
		return 0
	}
	return f.cpu.Seconds() / f.wall.Seconds()
}

// sampler samples RSS every 50ms until stopped.
type sampler struct {
	p      *proc
	stopCh chan struct{}
	wg     sync.WaitGroup
	peak   int64
	cpu0   time.Duration
	t0     time.Time
}

func (p *proc) sample() *sampler {
	s := &sampler{p: p, stopCh: make(chan struct{}), cpu0: p.cpu(), t0: time.Now(), peak: p.rssBytes()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stopCh:
				return
			case <-t.C:
				if r := p.rssBytes(); r > s.peak {
					s.peak = r
				}
			}
		}
	}()
	return s
}

func (s *sampler) stop() footprint {
	close(s.stopCh)
	s.wg.Wait()
	end := s.p.rssBytes()
	if end > s.peak {
		s.peak = end
	}
	split, _ := binaryPages(s.p.cmd.Process.Pid) // a report row left at zero, not a failed run
	return footprint{rssPeak: s.peak, rssEnd: end, anonEnd: s.p.anonBytes(), fileEnd: s.p.fileBytes(), filePages: split,
		hwm: s.p.status("VmHWM:"), cpu: s.p.cpu() - s.cpu0, wall: time.Since(s.t0)}
}

// binaryPageSplit is the binary's resident pages by what they hold, in bytes.
type binaryPageSplit struct {
	code   int64 // .text: the machine code
	tables int64 // .gopclntab: the runtime's function tables (stack maps, unwinding, names)
	rest   int64 // read-only data (types, strings, constants) and the data segment
}

// binaryPages splits the process's resident pages of its own binary by ELF section: which
// part of the file-backed RSS is code, which the runtime's function tables (read for each
// frame a stack scan or a traceback meets) and which data. The pages come from
// /proc/<pid>/pagemap (present and file-backed), the sections from the binary's section
// headers.
func binaryPages(pid int) (binaryPageSplit, error) {
	var split binaryPageSplit
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	path, err := os.Readlink(exe)
	if err != nil {
		return split, err
	}
	ef, err := elf.Open(exe)
	if err != nil {
		return split, err
	}
	defer ef.Close()
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return split, err
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return split, err
	}
	defer pm.Close()
	page := uint64(os.Getpagesize())
	in := func(name string, addr uint64) bool {
		sec := ef.Section(name)
		return sec != nil && addr >= sec.Addr && addr < sec.Addr+sec.Size
	}
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != path {
			continue
		}
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			return split, fmt.Errorf("/proc/%d/maps: %q: %w", pid, f[0], err)
		}
		entries := make([]byte, (hi-lo)/page*8)
		if _, err := pm.ReadAt(entries, int64(lo/page*8)); err != nil {
			return split, err
		}
		for k := range (hi - lo) / page {
			// Bit 63: present; bit 61: file-backed (a data page the process wrote is a private,
			// anonymous copy, counted in RssAnon).
			if e := binary.LittleEndian.Uint64(entries[k*8:]); e>>63 == 0 || e>>61&1 == 0 {
				continue
			}
			switch addr := lo + k*page; {
			case in(".text", addr):
				split.code += int64(page)
			case in(".gopclntab", addr):
				split.tables += int64(page)
			default:
				split.rest += int64(page)
			}
		}
	}
	return split, nil
}

// idleFootprint waits until the process's CPU use settles (<5% of a core over 1s, at most
// 20s), then measures RSS and CPU over a window.
func (p *proc) idleFootprint(window time.Duration) footprint {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c0 := p.cpu()
		time.Sleep(time.Second)
		if (p.cpu() - c0) < 50*time.Millisecond {
			break
		}
	}
	s := p.sample()
	time.Sleep(window)
	return s.stop()
}

// profile fetches a pprof profile (path such as "profile?seconds=20" or "heap") into dir.
func (p *proc) profile(dir, path, file string) error {
	if p.pprof == "" || dir == "" {
		return nil
	}
	resp, err := http.Get("http://" + p.pprof + "/debug/pprof/" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, file))
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// apiProfileWindow is the length of the API server's CPU profile of each storm, from its
// release: the storm's densest part. On a slow machine a storm lasts longer; both sides'
// profiles then still cover the same first seconds.
const apiProfileWindow = 10 * time.Second

// apiServerProfile fetches a CPU profile of kube-apiserver (its --profiling endpoint) into dir.
func apiServerProfile(ctx context.Context, cfg *rest.Config, window time.Duration, dir, file string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(window.Seconds()))).Timeout(window + time.Minute).DoRaw(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, file), raw, 0o644)
}

// apiWrites reads the API server's own write counters (apiserver_request_total) per
// resource[/subresource]: POST, PUT, PATCH, APPLY and DELETE with any code; and, under
// "sec <key>" and "n <key>", the sum and count of its apiserver_request_duration_seconds
// histogram for those writes (the time the API server took to serve them). It also returns
// every request of any verb under "req <VERB> <key>" (-request-mix), and the watchers the API
// server closed as too slow under "terminated watchers"; quiesce leaves both out.
func apiWrites(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the API server's /metrics: %w", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		name, rest, ok := strings.Cut(l, "{")
		var prefix string
		if name == "apiserver_terminated_watchers_total" {
			// Watchers the API server closed because they did not keep up: each is a watch the
			// client re-establishes, work no request counter shows.
			if _, after, ok := strings.Cut(l, "}"); ok {
				v, _ := strconv.ParseFloat(strings.TrimSpace(after), 64)
				out["terminated watchers"] += v
			}
			continue
		}
		switch name {
		case "apiserver_request_total":
		case "apiserver_request_duration_seconds_sum":
			prefix = "sec "
		case "apiserver_request_duration_seconds_count":
			prefix = "n "
		default:
			continue
		}
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:end], ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		if name == "apiserver_request_total" {
			key := labels["verb"] + " " + labels["resource"]
			if sr := labels["subresource"]; sr != "" {
				key += "/" + sr
			}
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
			out["req "+key] += v // every request, reads included (-request-mix)
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		default:
			continue
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		key := labels["resource"]
		if sr := labels["subresource"]; sr != "" {
			key += "/" + sr
		}
		if labels["code"] == "429" {
			// Refused before any work (API Priority and Fairness, max-in-flight); the client
			// sends it again. Counted apart, as test/framework/apicount does.
			if prefix == "" {
				out[key+" 429"] += v
			}
			continue
		}
		if prefix != "" {
			out[prefix+key] += v
			continue
		}
		out[key] += v
		if labels["code"] == "409" {
			out[key+" 409"] += v
		}
	}
	return out, sc.Err()
}

// webhookCalls is the number of admission webhook calls the API server has made.
func webhookCalls(ctx context.Context, cfg *rest.Config) (float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var n float64
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "apiserver_admission_webhook_admission_duration_seconds_count{") && strings.Contains(l, "planmodeconfig") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(l[strings.LastIndexByte(l, '}')+1:]), 64)
			n += v
		}
	}
	return n, nil
}
