package harness_test

import (
	"testing"

	"github.com/harness-dev/planmode-operator/internal/chatmodel"
)

// planSectionMarker opens the plan:policy section of the harness's system prompt.
const planSectionMarker = chatmodel.PlanSectionMarker

// newScriptedModel starts the scripted model (internal/chatmodel) playing script, in request
// order (a retried request takes the next reply), until the test ends.
func newScriptedModel(t *testing.T, script []chatmodel.Reply) *chatmodel.Model {
	m := chatmodel.New()
	m.ScriptAll(script)
	t.Cleanup(m.Close)
	return m
}
