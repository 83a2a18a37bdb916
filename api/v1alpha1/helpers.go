package v1alpha1

// ConfigName is the PlanModeConfig the session's spec asks for: spec.planMode.configRef.name,
// else the namespace's DefaultPlanModeConfigName.
func (s *AgentSession) ConfigName() string {
	if ref := s.Spec.PlanMode.ConfigRef; ref != nil && ref.Name != "" {
		return ref.Name
	}
	return DefaultPlanModeConfigName
}
