package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultPlanModeConfigName is the PlanModeConfig a session uses when its spec names none.
const DefaultPlanModeConfigName = "default"

// MaxSectionBytes caps the plan guidance text. The section is rendered into every model request
// while plan mode is on, so a runaway value is a cost and context-window problem, not only a
// storage one.
const MaxSectionBytes = 64 * 1024

// PlanModeConfigSpec is the harness's PlanModeConfig: exactly { section }.
//
// The schema keeps unknown fields and leaves section untyped on purpose: the harness refuses a
// non-string section and any unknown key with its own wording, and those values must reach the
// admission webhook instead of being pruned or type-rejected by the API server first.
// +kubebuilder:pruning:PreserveUnknownFields
type PlanModeConfigSpec struct {
	// Section (a string; kubectl explain shows Object because the schema leaves its type to the
	// admission webhook) is the deployment-owned guidance rendered, byte for byte, as the
	// `plan:policy` system-prompt section (order 50) while plan mode is active. Required; must be
	// a string that is not blank; at most 65536 bytes. It is never trimmed.
	// Not marked required in the schema: a missing section must reach the webhook, which
	// refuses it with the harness's message.
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Section string `json:"section"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=pmc,categories={planmode,agents}
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// PlanModeConfig is the plan guidance for the AgentSessions of its namespace that reference it.
// The one named "default" is used by sessions that name none. It is meant to be kept in Git and
// is validated at admission with the harness's own rules.
type PlanModeConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is required by the admission webhook, not by the schema: a config without one must
	// reach the webhook and be refused with the harness's own message.

	// +optional
	Spec PlanModeConfigSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// PlanModeConfigList contains a list of PlanModeConfig.
type PlanModeConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PlanModeConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PlanModeConfig{}, &PlanModeConfigList{})
}
