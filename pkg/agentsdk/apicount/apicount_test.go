package apicount

import "testing"

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions/a/status": "agentsessions/status",
		"/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions/a":        "agentsessions",
		"/apis/agents.harness.dev/v1alpha1/namespaces/ns/agentsessions":          "agentsessions",
		"/apis/events.k8s.io/v1/namespaces/ns/events":                            "events",
		"/api/v1/namespaces": "namespaces",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}
