package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// watchedKinds are the kinds the manager's cache watches (controllers.SetupWithManager); the
// floor watches only AgentSessions.
var watchedKinds = []client.Object{&v1alpha1.AgentSession{}, &v1alpha1.PlanModeConfig{}, &v1alpha1.ReviewPolicy{}}

// primeWatchCaches syncs one informer of every kind a measured process watches, and stops it.
// A fresh API server builds a custom resource's watch cache at the first request for it and
// answers watches with 429 (Retry-After: 1 s) until that cache is ready. Without this, the first
// process to watch a kind nobody read yet (the manager's ReviewPolicies) waits that second at
// its first start, a cost of the fresh control plane that no running cluster pays.
func primeWatchCaches(ctx context.Context, cfg *rest.Config) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	for _, o := range watchedKinds {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return fmt.Errorf("prime the API server's watch cache of %T: %w", o, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("prime the API server's watch caches: not synced within a minute")
	}
	cancel()
	return <-done
}
