// Package v1alpha1 contains the agents.harness.dev/v1alpha1 API: AgentSession, which holds one
// coding agent's plan-mode selection and its committed state, and PlanModeConfig, the
// deployment-owned plan guidance.
// +kubebuilder:object:generate=true
// +groupName=agents.harness.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "agents.harness.dev", Version: "v1alpha1"}

	// AgentSessionResource is the AgentSession CRD's resource (its plural, namespaced).
	AgentSessionResource = GroupVersion.WithResource("agentsessions")

	// AgentSessionKind is the AgentSession CRD's kind.
	AgentSessionKind = GroupVersion.WithKind("AgentSession")

	// AgentSessionListKind is the kind of a list of AgentSessions.
	AgentSessionListKind = GroupVersion.WithKind("AgentSessionList")

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	// controller-runtime deprecates its Builder for API packages; apimachinery's
	// runtime.SchemeBuilder would change this package's exported SchemeBuilder, an API change.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion} //nolint:staticcheck // SA1019, see above

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
