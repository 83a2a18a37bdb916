package v1alpha1

import "testing"

func TestConfigName(t *testing.T) {
	for _, tc := range []struct {
		ref  *ConfigReference
		want string
	}{
		{nil, DefaultPlanModeConfigName},
		{&ConfigReference{}, DefaultPlanModeConfigName},
		{&ConfigReference{Name: "strict"}, "strict"},
	} {
		s := &AgentSession{}
		s.Spec.PlanMode.ConfigRef = tc.ref
		if got := s.ConfigName(); got != tc.want {
			t.Errorf("ConfigName() with configRef %+v = %q, want %q", tc.ref, got, tc.want)
		}
	}
}
