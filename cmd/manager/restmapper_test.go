package main

import (
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// countingMapper counts what reaches discovery's mapper.
type countingMapper struct {
	meta.RESTMapper
	asked []schema.GroupKind
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked = append(c.asked, gk)
	return c.RESTMapper.RESTMapping(gk, versions...)
}

// The AgentSession mapping the manager answers itself is the shipped CRD's (plural, scope,
// version), is not shared between callers, and every other kind or version still goes to
// discovery, where a kind the cluster lacks is no match.
func TestSessionMapperAnswersAgentSessionAsTheCRDDefinesIt(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/agents.harness.dev_agentsessions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	discovery := meta.NewDefaultRESTMapper(nil)
	policy := agentsv1alpha1.GroupVersion.WithKind("ReviewPolicy")
	discovery.Add(policy, meta.RESTScopeNamespace)
	delegate := &countingMapper{RESTMapper: discovery}
	m := sessionMapper{delegate}

	gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
	for _, versions := range [][]string{{agentsv1alpha1.GroupVersion.Version}, nil} {
		got, err := m.RESTMapping(gk, versions...)
		if err != nil {
			t.Fatalf("RESTMapping(%v, %v): %v", gk, versions, err)
		}
		served := false
		for _, v := range crd.Spec.Versions {
			served = served || v.Served && v.Name == got.GroupVersionKind.Version
		}
		if got.Resource.Resource != crd.Spec.Names.Plural || got.Resource.Group != crd.Spec.Group || !served ||
			got.Resource.Version != got.GroupVersionKind.Version ||
			(got.Scope.Name() == meta.RESTScopeNameNamespace) != (crd.Spec.Scope == apiextensionsv1.NamespaceScoped) {
			t.Fatalf("AgentSession mapping %+v does not match the CRD (%s, %s, %v)", got, crd.Spec.Names.Plural, crd.Spec.Scope, crd.Spec.Versions)
		}
		got.Resource.Resource = "changed"
	}
	if again, _ := m.RESTMapping(gk); again.Resource.Resource != crd.Spec.Names.Plural {
		t.Fatal("a caller's change to the mapping reached the next caller")
	}
	if len(delegate.asked) != 0 {
		t.Fatalf("AgentSession went to discovery: %v", delegate.asked)
	}

	if got, err := m.RESTMapping(policy.GroupKind(), policy.Version); err != nil || got.GroupVersionKind != policy {
		t.Fatalf("ReviewPolicy = %+v, %v; want discovery's mapping", got, err)
	}
	if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("AgentSession v1 (not served) = %v, want discovery's no match", err)
	}
	other := schema.GroupKind{Group: agentsv1alpha1.GroupVersion.Group, Kind: "Missing"}
	if _, err := m.RESTMapping(other); !meta.IsNoMatchError(err) {
		t.Fatalf("a kind the cluster lacks = %v, want no match", err)
	}
	if len(delegate.asked) != 3 {
		t.Fatalf("discovery asked %v, want ReviewPolicy, AgentSession v1 and Missing", delegate.asked)
	}
}
