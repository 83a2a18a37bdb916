package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sectionDigestBytes is how much of the SHA-256 status.planMode.config.sectionSHA256 keeps.
const sectionDigestBytes = 8

// SectionDigest is status.planMode.config.sectionSHA256 for a section text: the first 16 hex
// digits of its SHA-256.
func SectionDigest(section string) string {
	sum := sha256.Sum256([]byte(section))
	return hex.EncodeToString(sum[:sectionDigestBytes])
}

// ConfigName is the PlanModeConfig the session's spec asks for: spec.planMode.configRef.name,
// else the namespace's DefaultPlanModeConfigName.
func (s *AgentSession) ConfigName() string {
	if ref := s.Spec.PlanMode.ConfigRef; ref != nil && ref.Name != "" {
		return ref.Name
	}
	return DefaultPlanModeConfigName
}

// AgentSessionMetadata names an AgentSession as metadata only. A write given it (a status
// patch whose answer the writer does not need) reads back only the session's metadata: the
// API server encodes, and the writer decodes, a fraction of the object.
func AgentSessionMetadata(namespace, name string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	m.SetGroupVersionKind(AgentSessionKind)
	return m
}
