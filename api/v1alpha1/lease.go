package v1alpha1

import (
	"strings"
	"time"
)

// Agent liveness (docs/protocol.md, "Agent liveness"): a running agent renews a
// coordination.k8s.io Lease in its session's namespace, named AgentLeaseName(session), every
// AgentLeaseRenewInterval, with spec.leaseDurationSeconds AgentLeaseDuration. Time, not steps:
// an agent makes no API write per step for it.
const (
	// AgentLeasePrefix starts the name of every agent liveness Lease; the admission policy that
	// config/rbac installs lets agent identities write no other Lease.
	AgentLeasePrefix = "agentsession-"
	// AgentLeaseDuration is the Lease's spec.leaseDurationSeconds: an agent whose Lease was not
	// renewed for this long is gone. Three renewals, so one lost renewal is no disconnection.
	AgentLeaseDuration = 90 * time.Second
	// AgentLeaseRenewInterval is how often a running agent renews its Lease: one write per
	// agent per interval (10,000 agents: about 330 writes a second), which is why it is not
	// shorter.
	AgentLeaseRenewInterval = 30 * time.Second
	// AgentLeaseSessionLabel labels the Lease with its session's name.
	AgentLeaseSessionLabel = "agents.harness.dev/session"
)

// AgentLeaseName is the liveness Lease of the AgentSession named session.
func AgentLeaseName(session string) string {
	name := AgentLeasePrefix + session
	if len(name) > 253 {
		name = strings.TrimRight(name[:253], ".-")
	}
	return name
}
