package framework

import "testing"

func TestClusterRolesReadsConfigRBAC(t *testing.T) {
	roles, err := ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range roles {
		if r.Kind != "ClusterRole" || r.ResourceVersion != "" || len(r.Rules) == 0 && r.AggregationRule == nil {
			t.Errorf("%s: kind %q, resourceVersion %q, %d rules: not a ClusterRole to create", r.Name, r.Kind, r.ResourceVersion, len(r.Rules))
		}
		names[r.Name] = true
	}
	for _, want := range []string{"manager-role", "agentsession-agent-role", "agentsession-reviewer-role"} {
		if !names[want] {
			t.Errorf("no ClusterRole %s among %v", want, names)
		}
	}
}
