package main

import (
	"net/http"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// sessionMapper answers the REST mapping of AgentSession from the manager's own API and asks
// the discovery-backed mapper for every other kind. Every status write reads its answer as
// metadata (AgentSessionMetadata), and controller-runtime's metadata client, unlike its typed
// client, asks the mapper for each request, whose lookup allocates more than the write's own
// body; the AgentSession mapping is fixed by the CRD this manager ships with. Other kinds keep
// discovery: ReviewPolicy's missing CRD must still read as no match (phase_review.go).
type sessionMapper struct {
	meta.RESTMapper
}

var sessionMapping = meta.RESTMapping{
	Resource:         agentsv1alpha1.AgentSessionResource,
	GroupVersionKind: agentsv1alpha1.AgentSessionKind,
	Scope:            meta.RESTScopeNamespace,
}

// newSessionMapper is the manager's MapperProvider: controller-runtime's default mapper
// behind sessionMapper.
func newSessionMapper(c *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(c, hc)
	if err != nil {
		return nil, err
	}
	return sessionMapper{m}, nil
}

// RESTMapping implements meta.RESTMapper.
func (m sessionMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	gvk := sessionMapping.GroupVersionKind
	if gk == gvk.GroupKind() && (len(versions) == 0 || slices.Contains(versions, gvk.Version)) {
		mapping := sessionMapping // a copy: the caller may change it
		return &mapping, nil
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}
