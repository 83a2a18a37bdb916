package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

func (b *bench) countSessions(ctx context.Context, ns string, ok func(*v1alpha1.AgentSession) bool) (int, error) {
	n, cont := 0, ""
	for {
		var l v1alpha1.AgentSessionList
		if err := b.user.List(ctx, &l, client.InNamespace(ns), client.Limit(1000), client.Continue(cont)); err != nil {
			return 0, err
		}
		for i := range l.Items {
			if ok(&l.Items[i]) {
				n++
			}
		}
		if cont = l.Continue; cont == "" {
			return n, nil
		}
	}
}

// appendResult is appends/s with n sessions appending concurrently, one writer each.
type appendResult struct {
	backend string
	n       int
	events  int64
	wall    time.Duration
	lat     []time.Duration
}

func (r appendResult) perSecond() float64 { return float64(r.events) / r.wall.Seconds() }

func (b *bench) appends(ctx context.Context, backend string, n int) (appendResult, error) {
	r := appendResult{backend: backend, n: n}
	url, err := b.storeURL(ctx, backend)
	if err != nil {
		return r, err
	}
	store, err := sessionlog.Open(ctx, url)
	if err != nil {
		return r, err
	}
	defer store.Close()
	const window = 5 * time.Second
	var (
		total atomic.Int64
		mu    sync.Mutex
		stop  = make(chan struct{})
	)
	start := time.Now()
	time.AfterFunc(window, func() { close(stop) })
	err = parallel(n, 0, func(i int) error {
		id := fmt.Sprintf("append-%d-%d", b.seq, i)
		var next int64
		var lat []time.Duration
		for {
			select {
			case <-stop:
				mu.Lock()
				r.lat = append(r.lat, lat...)
				mu.Unlock()
				return nil
			default:
			}
			t := time.Now()
			tail, err := store.Append(ctx, id, harness.Sequence(next, agentsdk.UserText("x")))
			if err != nil {
				return err
			}
			lat = append(lat, time.Since(t))
			next = tail.NextSeq
			total.Add(1)
		}
	})
	r.wall = time.Since(start)
	r.events = total.Load()
	return r, err
}

// tailResult is pkg/sessionlog's BenchmarkTailRatio: median Tail() at 10 and 1,000,000 events.
type tailResult struct {
	backend           string
	at10, at10k, at1M float64 // ns
}

func (b *bench) tailRatio(ctx context.Context) ([]tailResult, error) {
	bin := filepath.Join(b.o.tmp, "sessionlog.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, "./pkg/sessionlog/")
	build.Dir = b.o.root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c ./pkg/sessionlog: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, bin, "-test.run", "^$", "-test.bench", "^BenchmarkTailRatio$", "-test.benchtime", b.o.tailTime, "-test.timeout", "30m")
	cmd.Dir = filepath.Join(b.o.root, "pkg", "sessionlog")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("BenchmarkTailRatio: %v\n%s", err, out)
	}
	var res []tailResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkTailRatio/") {
			continue
		}
		t := tailResult{backend: strings.SplitN(strings.TrimPrefix(f[0], "BenchmarkTailRatio/"), "-", 2)[0]}
		for i := 1; i+1 < len(f); i++ {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/tail@10":
				t.at10 = v
			case "ns/tail@10k":
				t.at10k = v
			case "ns/tail@1M":
				t.at1M = v
			}
		}
		if t.at10 > 0 {
			res = append(res, t)
		}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no BenchmarkTailRatio results in:\n%s", out)
	}
	return res, nil
}

// webhookResult is the latency of user writes of each kind, without and with the admission
// webhooks (served by the real manager binary).
type webhookResult struct {
	kinds []string
	floor map[string][]time.Duration
	with  map[string][]time.Duration
}

const webhookSamples = 300

func (b *bench) webhookWrites(ctx context.Context, tag string) (map[string][]time.Duration, error) {
	ns, _, err := b.createSessions(ctx, "webhook-"+tag, 0, nil)
	if err != nil {
		return nil, err
	}
	out := map[string][]time.Duration{}
	timed := func(kind string, f func() error) error {
		t := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		out[kind] = append(out[kind], time.Since(t))
		return nil
	}
	section := strings.Repeat("Plan before you act. ", 50) // ~1 KiB
	for i := range webhookSamples {
		name := fmt.Sprintf("w-%04d", i)
		pmc := &v1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.PlanModeConfigSpec{Section: section}}
		if err := timed("PlanModeConfig create", func() error { return b.user.Create(ctx, pmc) }); err != nil {
			return nil, err
		}
		if err := timed("PlanModeConfig update", func() error {
			return b.user.Patch(ctx, pmc, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"section":%q}}`, section+strconv.Itoa(i)))))
		}); err != nil {
			return nil, err
		}
		as := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.AgentSessionSpec{SessionID: ns + "-" + name,
			Agent: &v1alpha1.AgentBinding{ServiceAccountName: "planmode-agent-" + name}}} // bound: the webhook's default
		if err := timed("AgentSession create", func() error { return b.user.Create(ctx, as) }); err != nil {
			return nil, err
		}
		if err := timed("AgentSession update (toggle)", func() error {
			return b.user.Patch(ctx, as, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"planMode":{"active":true}}}`)))
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// webhooks measures the writes with no webhook registered (the floor), then registers the
// webhooks of config/webhook pointing at a manager process and measures the same writes. The
// manager's reconciler is kept off these sessions with a shard selector that matches none, so
// only admission is measured.
func (b *bench) webhooks(ctx context.Context) (*webhookResult, error) {
	r := &webhookResult{kinds: []string{"PlanModeConfig create", "PlanModeConfig update", "AgentSession create", "AgentSession update (toggle)"}}
	var err error
	if r.floor, err = b.webhookWrites(ctx, sideFloor); err != nil {
		return nil, err
	}
	wo := &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(b.o.root, "config", "webhook")}}
	if err := wo.PrepWithoutInstalling(); err != nil {
		return nil, err
	}
	p, err := b.startProc(ctx, procOpts{side: sideManager, store: "sqlite://" + filepath.Join(b.o.tmp, "webhook.db"),
		shard: "planmode.harness.dev/shard=webhook-bench-none",
		webhook: []string{
			"--webhook-host=" + wo.LocalServingHost, fmt.Sprintf("--webhook-port=%d", wo.LocalServingPort),
			"--webhook-cert-dir=" + wo.LocalServingCertDir, "--webhook-manager-username=planmode-scale-manager",
		}})
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := wo.Install(b.cfg); err != nil {
		return nil, fmt.Errorf("register the webhooks: %w", err)
	}
	defer func() { _ = wo.Cleanup() }()
	// Registration reaches the API server's admission plugin asynchronously: wait until a
	// (dry-run) write has been sent to the webhook, by the API server's own metrics.
	deadline := time.Now().Add(b.o.timeout)
	for {
		probe := &v1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "webhook-probe"}, Spec: v1alpha1.PlanModeConfigSpec{Section: "probe"}}
		err := b.user.Create(ctx, probe, client.DryRunAll)
		calls, merr := webhookCalls(ctx, b.cfg)
		if merr != nil {
			return nil, merr
		}
		if err == nil && calls > 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the webhooks are not called after %s (last: %v)", b.o.timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r.with, err = b.webhookWrites(ctx, "with"); err != nil {
		return nil, err
	}
	return r, nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}
