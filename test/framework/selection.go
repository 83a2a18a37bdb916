package framework

import "github.com/harness-dev/planmode-operator/api/v1alpha1"

// SelectionWaits reports whether spec selects want and the selection waits for the agent's
// next step boundary as the agent sees it: pending in the status, or not taken on by the
// status yet (the manager holds that write for the agent's report, docs/protocol.md
// "Version 4"). Either way the agent asks at that boundary.
func SelectionWaits(s *v1alpha1.AgentSession, want bool) bool {
	pm, x := s.Status.PlanMode, s.Spec.PlanMode.Active
	return x != nil && *x == want && (pm.Pending || pm.Selection == nil || *pm.Selection != want)
}

// SelectionPending reports whether spec selects want and the status has written it as
// pending (what a floor controller does at once).
func SelectionPending(s *v1alpha1.AgentSession, want bool) bool {
	x := s.Spec.PlanMode.Active
	return x != nil && *x == want && s.Status.PlanMode.Pending
}
