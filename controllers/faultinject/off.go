//go:build !faultinject

// Package faultinject kills the manager at named points for the fault runs in
// test/reliability. This is the default build: nothing is wrapped and nothing crashes; build
// with -tags faultinject for the real hooks (faultinject.go).
package faultinject

import (
	"k8s.io/client-go/rest"

	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// Enabled reports that this build can crash on purpose.
const Enabled = false

// Hit does nothing in the default build.
func Hit(string) {}

// WrapStore returns s unchanged in the default build.
func WrapStore(s sessionlog.Store) sessionlog.Store { return s }

// WrapConfig returns cfg unchanged in the default build.
func WrapConfig(cfg *rest.Config) *rest.Config { return cfg }
