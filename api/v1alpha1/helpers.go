package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
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
