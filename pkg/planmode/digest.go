package planmode

import (
	"crypto/sha256"
	"encoding/hex"
)

// PlanSHA256 is the hex SHA-256 of a plan's text, byte for byte: what a review decision names
// (spec.review.planSHA256) to bind it to the text the reviewer read, and what the manager
// records when it opens the review (status.review.planSHA256).
func PlanSHA256(plan string) string {
	sum := sha256.Sum256([]byte(plan))
	return hex.EncodeToString(sum[:])
}
