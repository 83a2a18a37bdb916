package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// storeProbeInterval is how often the manager asks the log store for its identity: the
// planmode_log_store_up gauge and the store identity the reconciler records follow it.
const storeProbeInterval = 10 * time.Second

// storeProbe watches the log store apart from readiness. Readiness (/readyz) says whether the
// pod can serve what its Service routes to it: admission, which needs no store. Were the store
// part of it, a store outage would take every replica out of the webhook Service, and with
// failurePolicy Fail every AgentSession and PlanModeConfig write would be refused, the
// manager's own LogStoreUnavailable condition included (docs/operations.md).
type storeProbe struct {
	store sessionlog.Store
	log   logr.Logger
	up    prometheus.Gauge
	id    atomic.Pointer[string] // the identity of the last successful probe
	ok    atomic.Bool
	// changed tells the reconciler that the identity changed (every session is reconciled).
	changed chan event.GenericEvent
}

func newStoreProbe(store sessionlog.Store, log logr.Logger) *storeProbe {
	return &storeProbe{store: store, log: log, changed: make(chan event.GenericEvent, 1), up: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "planmode_log_store_up",
		Help: "1 when the manager's last probe of the session log store (every 10s, under the store's deadline) succeeded, else 0.",
	})}
}

// addStoreProbe runs a probe of store in mgr, its gauge on controller-runtime's registry.
func addStoreProbe(mgr manager.Manager, store sessionlog.Store) (*storeProbe, error) {
	probe := newStoreProbe(store, mgr.GetLogger().WithName("log-store"))
	if err := ctrlmetrics.Registry.Register(probe.up); err != nil {
		return nil, fmt.Errorf("register the log-store gauge: %w", err)
	}
	if err := mgr.Add(probe); err != nil {
		return nil, fmt.Errorf("add the log-store probe: %w", err)
	}
	return probe, nil
}

// probe asks the store once and records the outcome. A store that is no longer the one opened
// (sessionlog.StoreLostError: its file deleted, another database) is recorded as the identity
// found there, or as lostIdentity when there is none, so every session reconciles, reads its
// log and reports LogStoreMismatch with the way out, instead of staying settled on a status
// that no longer holds.
func (p *storeProbe) probe(ctx context.Context) {
	id, err := p.store.Identity(ctx)
	var lost *sessionlog.StoreLostError
	if errors.As(err, &lost) {
		id = lost.Found
		if id == "" {
			id = lostIdentity(lost.Opened)
		}
		if p.ok.Swap(false) || p.id.Load() == nil || *p.id.Load() != id {
			p.log.Error(err, "the session log store is not the one opened; nothing is written to it, sessions report LogStoreMismatch")
		}
		p.up.Set(0)
		p.record(id)
		return
	}
	if err != nil {
		if p.ok.Swap(false) || p.id.Load() == nil {
			p.log.Error(err, "the session log store does not answer; admission keeps serving, sessions report LogStoreUnavailable")
		}
		p.up.Set(0)
		return
	}
	p.record(id)
	if !p.ok.Swap(true) {
		p.log.Info("the session log store answers", "storeID", id)
	}
	p.up.Set(1)
}

// lostIdentity stands for no store where the one with identity opened was: it equals no
// store's identity.
func lostIdentity(opened string) string { return "lost:" + opened }

// record keeps id as the store's identity; a change makes every session reconcile.
func (p *storeProbe) record(id string) {
	if prev := p.id.Swap(&id); prev != nil && *prev != id {
		p.log.Info("the session log store has another identity: it was replaced, recreated or lost; sessions recorded against the old one stop with LogStoreMismatch",
			"was", *prev, "now", id)
		select {
		case p.changed <- event.GenericEvent{Object: &agentsv1alpha1.AgentSession{}}:
		default: // one already waits: it reconciles every session anyway
		}
	}
}

// StoreID is the identity of the store as last probed, or "" before the first success.
func (p *storeProbe) StoreID() string {
	if id := p.id.Load(); id != nil {
		return *id
	}
	return ""
}

// Start probes until ctx ends; every replica runs it, leader or not.
func (p *storeProbe) Start(ctx context.Context) error {
	t := time.NewTicker(storeProbeInterval)
	defer t.Stop()
	for {
		p.probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// NeedLeaderElection is false: the gauge describes this replica's view of the store.
func (p *storeProbe) NeedLeaderElection() bool { return false }

var _ manager.LeaderElectionRunnable = (*storeProbe)(nil)
