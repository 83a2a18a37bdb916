// Command manager runs the planmode-operator: the AgentSession reconciler (the only writer of
// plan/mode events), the admission webhooks, metrics, health probes and leader election.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/controllers/faultinject"
	"github.com/harness-dev/planmode-operator/internal/eventsink"
	planmetrics "github.com/harness-dev/planmode-operator/internal/metrics"
	"github.com/harness-dev/planmode-operator/internal/metricsauth"
	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/internal/version"
	"github.com/harness-dev/planmode-operator/internal/webhookdrain"
	"github.com/harness-dev/planmode-operator/pkg/connstr"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/webhooks"
)

// defaultLogStore is the embedded default for local runs: a SQLite file under ./.planmode.
const defaultLogStore = "sqlite://.planmode/sessions.db"

type options struct {
	logStore                string
	metricsAddr             string
	secureMetrics           bool
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	events                  string
	maxStoreBackoff         time.Duration
	pendingStatusDelay      time.Duration
	logStoreTimeout         time.Duration
	concurrency             int
	shutdownTimeout         time.Duration
	shutdownDrain           time.Duration
	shardSelector           string // shard.go
	sessionDecoder          string
	pprofAddr               string
	webhook                 webhooks.Options
	// Resolved by parseOptions: the store URL in force and the GOGC the process runs with.
	storeURL, gogc string
}

func main() {
	if err := run(); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}

func bindFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.logStore, "log-store", defaultLogStore,
		"Session log store URL: sqlite://<path> (a file; relative paths are under the working directory) or "+
			"postgres://user:password@host:5432/db?sslmode=... (shared with the agent pods). "+
			"The environment variable "+storeenv.Name+" overrides the default, so a password need not be on the command line.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint ('0' disables it).")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true,
		"Serve metrics over HTTPS, only to callers whose token passes a TokenReview and who may get /metrics (the metrics-reader role). "+
			"=false serves plain, unauthenticated HTTP: an explicit choice, for a loopback address on a developer's machine.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints ('0' disables them).")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so only one manager replica reconciles (and appends) at a time.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "planmode-operator.agents.harness.dev", "Name of the leader-election Lease.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader-election Lease (empty: the manager's own namespace in a cluster).")
	fs.StringVar(&o.events, "events", "on", "Emit events.k8s.io Events on transitions: on or off.")
	fs.StringVar(&o.sessionDecoder, "session-decoder", "jsonv2",
		"How the cache decodes the AgentSessions it lists and watches: jsonv2 (one pass of encoding/json/v2 over each object) "+
			"or client-go (client-go's decoder, as for every other kind; docs/performance.md compares them).")
	fs.DurationVar(&o.maxStoreBackoff, "max-store-backoff", 30*time.Second, "Upper bound of the retry delay after log-store errors.")
	fs.DurationVar(&o.pendingStatusDelay, "pending-status-delay", controllers.DefaultPendingStatusDelay,
		"How long a selection made during a turn waits for the agent's next step boundary before it is written as pending (the answer then carries the commit); 0 writes it at once.")
	fs.DurationVar(&o.logStoreTimeout, "log-store-timeout", sessionlog.DefaultCallTimeout,
		"Deadline of each log-store call: a hung store fails the call (LogStoreUnavailable on the session, a failed boundary answer) instead of blocking a worker.")
	fs.IntVar(&o.concurrency, "max-concurrent-reconciles", 8, "AgentSessions reconciled in parallel.")
	fs.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long to wait for reconciles in flight at shutdown.")
	fs.DurationVar(&o.shutdownDrain, "shutdown-drain", 0,
		"At SIGTERM, keep serving the webhooks this long, closing each connection after its response, before shutting them down, "+
			"so that a rolling upgrade refuses no write; reconciling stops and the leader Lease is released at once "+
			"(the shipped Deployment sets 5s; keep it below terminationGracePeriodSeconds).")
	bindShardFlags(fs, o)
	o.webhook = webhooks.DefaultOptions()
	o.webhook.BindFlags(fs)
}

// defaultGCPercent is the manager's GOGC unless the environment sets one. Its heap is mostly
// the informer cache, which lives as long as the process; the runtime's default of 100 lets the
// heap grow to twice that before a collection. With 50, 10,000 idle sessions stay within the
// footprint target, for more frequent collections while storms allocate (docs/performance.md).
const defaultGCPercent = 50

func run() error {
	o, fs, err := parseOptions()
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("setup")
	// The webhook server exists before the signal context: at SIGTERM the manager stops and
	// releases its lease at once, while the webhook server keeps serving for --shutdown-drain, so
	// a rolling upgrade refuses no write.
	srv, err := webhooks.NewServer(o.webhook)
	if err != nil {
		return err
	}
	drained := webhookdrain.Wrap(srv)
	ctx := drained.SignalContext(o.shutdownDrain)
	if err := ensureSQLiteDir(o.storeURL, o.storeURL == defaultLogStore); err != nil {
		return err
	}
	log.Info("starting", "version", version.String("manager"))
	log.Info("opening the session log store", "url", connstr.Redact(o.storeURL))
	store, err := openStore(ctx, o.storeURL, o.concurrency, o.logStoreTimeout)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			log.Error(err, "close the session log store")
		}
	}()
	mgr, err := newManager(&o, leaderElectionID(fs, &o), drained)
	if err != nil {
		return err
	}
	stopEvents, err := setupReconciler(ctx, mgr, store, &o)
	if err != nil {
		return err
	}
	defer stopEvents() // on the ways out before mgr.Start; stopping twice is harmless
	if o.webhook.Port >= 0 {
		if err := webhooks.SetupWithManager(mgr, o.webhook); err != nil {
			return fmt.Errorf("set up the admission webhooks: %w", err)
		}
	}
	log.Info("starting the manager", "logStore", connstr.Redact(o.storeURL), "leaderElect", o.leaderElect,
		"events", o.events, "webhookPort", o.webhook.Port, "shardSelector", o.shardSelector, "sessionDecoder", o.sessionDecoder, "gogc", o.gogc)
	err = mgr.Start(ctx)
	// The Events of the last reconciles are written while the webhooks drain: a pod deleted
	// with no grace period is killed before the drain ends.
	stopEvents()
	drained.Wait()
	if err != nil {
		return fmt.Errorf("run the manager: %w", err)
	}
	log.Info("manager stopped")
	return nil
}

// parseOptions reads the command line, sets up logging and GOGC, resolves the store URL (the
// environment's unless --log-store is given) and checks the options.
func parseOptions() (options, *flag.FlagSet, error) {
	var o options
	fs := flag.CommandLine
	bindFlags(fs, &o)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	fs.BoolFunc("version", "Print the version and exit.", printVersion("manager"))
	flag.Parse()
	ctrl.SetLogger(newLogger(zap.UseFlagOptions(&zapOpts)))
	o.gogc = os.Getenv("GOGC")
	if o.gogc == "" {
		debug.SetGCPercent(defaultGCPercent)
		o.gogc = fmt.Sprint(defaultGCPercent)
	}
	o.storeURL = o.logStore
	if v := storeenv.Lookup(); v != "" && !flagSet(fs, "log-store") {
		o.storeURL = v
	}
	return o, fs, checkOptions(&o)
}

// newManager is the controller-runtime manager the options describe, serving the webhooks on srv.
func newManager(o *options, leaseID string, srv webhook.Server) (ctrl.Manager, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(faultinject.WrapConfig(ctrl.GetConfigOrDie()), ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOptions(*o),
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              leaseID,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true, // the process exits right after Start returns
		GracefulShutdownTimeout:       &o.shutdownTimeout,
		WebhookServer:                 srv,
		PprofBindAddress:              o.pprofAddr,
		MapperProvider:                newSessionMapper, // restmapper.go
		// managedFields stripped; with --shard-selector only that shard's sessions (shard.go).
		Cache:    cacheOptions(o),
		NewCache: newCache(o),
	})
	if err != nil {
		return nil, fmt.Errorf("create the manager: %w", err)
	}
	return mgr, nil
}

// setupReconciler registers the metrics (docs/metrics.md, on controller-runtime's registry,
// served on /metrics), the health checks and the store probe, and the AgentSession reconciler
// with its Event writer when --events is on; stopEvents drains that writer.
func setupReconciler(ctx context.Context, mgr ctrl.Manager, store sessionlog.Store, o *options) (stopEvents func(), err error) {
	rec := planmetrics.New()
	if err := rec.Register(ctrlmetrics.Registry); err != nil {
		return nil, fmt.Errorf("register the plan-mode metrics: %w", err)
	}
	gauges := planmetrics.NewSessionCollector()
	if err := ctrlmetrics.Registry.Register(gauges); err != nil {
		return nil, fmt.Errorf("register the session gauges: %w", err)
	}
	probe, err := addHealthChecks(mgr, store, o.webhook.Port >= 0)
	if err != nil {
		return nil, err
	}
	r := &controllers.AgentSessionReconciler{
		Client:             mgr.GetClient(),
		Store:              planmetrics.InstrumentStore(store, rec),
		StoreID:            probe.StoreID,
		StoreChanged:       probe.changed,
		Metrics:            rec,
		MaxStoreBackoff:    o.maxStoreBackoff,
		PendingStatusDelay: o.pendingStatusDelay,
		SessionGauges:      gauges.EventHandler(),
	}
	stopEvents = func() {}
	if o.events == "on" {
		// Events wait while every worker is busy (a storm), behind the status writes.
		sink, stop, err := eventsink.Start(ctx, mgr, controllers.FieldManager, ctrl.Log.WithName("events"), eventsink.Options{HoldWhile: r.Behind})
		if err != nil {
			return nil, err
		}
		if err := registerCollectors(sink.Collectors()...); err != nil {
			stop()
			return nil, fmt.Errorf("register the Event metrics: %w", err)
		}
		r.Recorder, stopEvents = sink, stop
	}
	if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: o.concurrency}); err != nil {
		stopEvents()
		return nil, fmt.Errorf("set up the AgentSession controller: %w", err)
	}
	return stopEvents, nil
}

// newScheme holds the built-in types and agents.harness.dev/v1alpha1.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register client-go types: %w", err)
	}
	if err := agentsv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register agents.harness.dev/v1alpha1: %w", err)
	}
	return scheme, nil
}

func registerCollectors(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := ctrlmetrics.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// openStore opens the session log with one PostgreSQL connection per worker: each reconcile
// holds at most one (an append holds it through its commit), and pgx's default of 4 made
// workers queue for the pool.
func openStore(ctx context.Context, storeURL string, workers int, callTimeout time.Duration) (sessionlog.Store, error) {
	openCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	store, err := sessionlog.Open(openCtx, storeURL, sessionlog.PoolSize(workers), sessionlog.CallTimeout(callTimeout))
	if err != nil {
		// The store's error may quote the URL: never let a password through.
		return nil, connstr.Error(fmt.Errorf("open log store %s: %w", connstr.Redact(storeURL), err), storeURL)
	}
	return faultinject.WrapStore(store), nil // identity unless built with -tags faultinject (test/reliability)
}

// addHealthChecks serves /healthz, and /readyz once, when the manager serves webhooks, the
// webhook server has started. The log store is not part of either: readiness routes admission
// traffic, which needs no store, and a restart cures no store outage. The store has its own
// probe instead (storeprobe.go), returned for the reconciler.
func addHealthChecks(mgr ctrl.Manager, store sessionlog.Store, serveWebhooks bool) (*storeProbe, error) {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("add the readiness check: %w", err)
	}
	if serveWebhooks {
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, fmt.Errorf("add the webhook readiness check: %w", err)
		}
	}
	return addStoreProbe(mgr, store)
}

// metricsOptions serves /metrics; with --metrics-secure over HTTPS, and only to callers whose
// token passes a TokenReview and who may "get" the /metrics non-resource URL (the
// metrics-reader ClusterRole in config/rbac).
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.secureMetrics}
	if o.secureMetrics {
		m.FilterProvider = metricsauth.New
	}
	return m
}

func checkOptions(o *options) error {
	var errs []string
	if o.events != "on" && o.events != "off" {
		errs = append(errs, fmt.Sprintf("--events is %q; use on or off", o.events))
	}
	if o.sessionDecoder != "jsonv2" && o.sessionDecoder != "client-go" {
		errs = append(errs, fmt.Sprintf("--session-decoder is %q; use jsonv2 or client-go", o.sessionDecoder))
	}
	if o.concurrency < 1 {
		errs = append(errs, fmt.Sprintf("--max-concurrent-reconciles is %d; use 1 or more", o.concurrency))
	}
	if o.logStoreTimeout <= 0 {
		errs = append(errs, fmt.Sprintf("--log-store-timeout is %s; use a positive duration such as 15s", o.logStoreTimeout))
	}
	if o.pendingStatusDelay < 0 {
		errs = append(errs, fmt.Sprintf("--pending-status-delay is %s; use 0 (write at once) or a positive duration such as 30s", o.pendingStatusDelay))
	}
	if o.maxStoreBackoff <= 0 {
		errs = append(errs, fmt.Sprintf("--max-store-backoff is %s; use a positive duration such as 30s", o.maxStoreBackoff))
	}
	if o.leaderElect && o.leaderElectionID == "" {
		errs = append(errs, "--leader-election-id is empty; name the Lease, for example planmode-operator.agents.harness.dev")
	}
	errs = append(errs, checkShard(o)...)
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// printVersion is the action of a --version flag: print and exit, before anything starts.
func printVersion(binary string) func(string) error {
	return func(string) error {
		fmt.Println(version.String(binary))
		os.Exit(0)
		return nil
	}
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ensureSQLiteDir creates the directory of the default SQLite file, so the default works on a
// fresh checkout. Any other directory must exist: a mistyped --log-store is an error naming it,
// not a new directory tree with an empty log in it.
func ensureSQLiteDir(storeURL string, isDefault bool) error {
	if !strings.HasPrefix(storeURL, "sqlite://") {
		return nil
	}
	path := strings.TrimPrefix(storeURL, "sqlite://")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	dir := filepath.Dir(path)
	if dir == "" || dir == "." {
		return nil
	}
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return nil
	}
	if !isDefault {
		return fmt.Errorf("--log-store %s: directory %s does not exist; create it first (the manager creates only the default %s)",
			connstr.Redact(storeURL), dir, filepath.Dir(strings.TrimPrefix(defaultLogStore, "sqlite://")))
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create the directory of the SQLite log store %s: %w", dir, err)
	}
	return nil
}
