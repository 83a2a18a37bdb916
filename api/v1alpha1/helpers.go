package v1alpha1

// ConfigName is the name of the PlanModeConfig in force for the session: the one it names, or
// the namespace's default.
func (s *AgentSession) ConfigName() string {
	if r := s.Spec.PlanMode.ConfigRef; r != nil && r.Name != "" {
		return r.Name
	}
	return DefaultPlanModeConfigName
}
