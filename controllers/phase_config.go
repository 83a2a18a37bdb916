package controllers

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// readConfig resolves the PlanModeConfig in force. A missing config holds only entering plan
// mode (there would be no guidance to render); leaving it never waits for a config, and no
// step waits for it (a plan-mode step meanwhile gets the guidance its agent last saw,
// docs/protocol.md).
func (sc *sessionScope) readConfig(ctx context.Context) (ctrl.Result, error) {
	ns, name := sc.session.Namespace, sc.session.ConfigName()
	var cfg agentsv1alpha1.PlanModeConfig
	err := sc.r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cfg)
	switch {
	case apierrors.IsNotFound(err):
		sc.planMode.Config = nil
		return ctrl.Result{}, configMissing(ns, name)
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get PlanModeConfig %s/%s: %w", ns, name, err)
	}
	sc.planMode.Config = configInForce(&cfg)
	return ctrl.Result{}, nil
}

// configInForce identifies a config's guidance: its generation, and a digest of the text so a
// changed text shows even across a delete and re-create.
func configInForce(cfg *agentsv1alpha1.PlanModeConfig) *agentsv1alpha1.ConfigInForce {
	return &agentsv1alpha1.ConfigInForce{Name: cfg.Name, Generation: cfg.Generation, SectionSHA256: agentsv1alpha1.SectionDigest(cfg.Spec.Section)}
}
