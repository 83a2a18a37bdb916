// Command floormgr is the benchmark's floor as a process: the same controller-runtime manager
// as cmd/manager (same cache transform, same worker count, same shard selector) running
// test/framework/floor instead of the plan-mode reconciler. It copies spec.planMode.active to
// status and echoes boundary reports with the log tail, with no log append, no Events, no
// config reads. test/scale runs it side by side with the real manager binary, so memory, CPU
// and latency are compared process to process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework/floor"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floormgr:", err)
		os.Exit(1)
	}
}

func run() error {
	storeURL := flag.String("log-store", "", "session log store URL (as cmd/manager)")
	workers := flag.Int("max-concurrent-reconciles", 8, "AgentSessions reconciled in parallel")
	shard := flag.String("shard-selector", "", "label selector of the AgentSessions handled (as cmd/manager)")
	probe := flag.String("health-probe-bind-address", "0", "address of /healthz and /readyz")
	pprof := flag.String("pprof-bind-address", "0", "address of net/http/pprof")
	metrics := flag.String("metrics-bind-address", "0", "address of /metrics (plain HTTP; '0' disables it)")
	observe := flag.Bool("observe-generation", true, "write status.observedGeneration for each generation seen, a new session's first included (floor.Reconciler.ObserveGeneration)")
	shape := flag.String("status-shape", "echo", "echo: the floor's own fields only; manager: also what the manager stores (floor.Reconciler.ManagerShape)")
	flag.Parse()
	if *shape != "echo" && *shape != "manager" {
		return fmt.Errorf("--status-shape is %q; use echo or manager", *shape)
	}
	ctrl.SetLogger(zap.New())
	if v := os.Getenv("PLANMODE_LOG_STORE"); *storeURL == "" {
		*storeURL = v
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	store, err := sessionlog.Open(octx, *storeURL, sessionlog.PoolSize(*workers)) // as cmd/manager
	cancel()
	if err != nil {
		return err
	}
	defer store.Close()
	copts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if *shard != "" {
		sel, err := labels.Parse(*shard)
		if err != nil {
			return fmt.Errorf("--shard-selector: %w", err)
		}
		copts.ByObject = map[client.Object]cache.ByObject{&v1alpha1.AgentSession{}: {Label: sel}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metrics},
		HealthProbeBindAddress: *probe,
		PprofBindAddress:       *pprof,
		Cache:                  copts,
	})
	if err != nil {
		return err
	}
	r := &floor.Reconciler{Client: mgr.GetClient(), Store: store, Options: controller.Options{MaxConcurrentReconciles: *workers},
		ManagerShape: *shape == "manager", ObserveGeneration: *observe}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
