package agentsdk

import (
	"context"
	"fmt"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// LogStoreMismatchError refuses to start an agent on a log store that is not the one its
// AgentSession's status was recorded against (another store identity, or a log that ends
// before the recorded position): running there would start from a log that forgot the
// session's plan state, outside plan mode without asking. The manager reports the same with
// the LogStoreMismatch condition; Reason says how to recover.
//
// A store lost under a running agent (its SQLite file deleted, its database recreated) is the
// store's own check, on every reopen and new connection: every call of the Client then fails
// with a *sessionlog.StoreLostError and nothing is written, so no step can start; the agent
// should stop (the reference agent's run ends), and when it starts again New refuses the new
// store with this error until the session adopts it.
type LogStoreMismatchError struct {
	Namespace, Name string
	Reason          string
}

func (e *LogStoreMismatchError) Error() string {
	return fmt.Sprintf("agentsdk: AgentSession %s/%s: %s", e.Namespace, e.Name, e.Reason)
}

// checkLogStore compares the store's identity and the log's tail with what the session's
// status recorded.
func (c *Client) checkLogStore(ctx context.Context, s *v1alpha1.AgentSession, t harness.Tail) error {
	id, err := c.store.Identity(ctx)
	if err != nil {
		return fmt.Errorf("agentsdk: read the identity of the session log store: %w", err)
	}
	if err := s.LogStoreMismatch(id, t.NextSeq); err != nil {
		return &LogStoreMismatchError{Namespace: c.ns, Name: c.name, Reason: err.Error()}
	}
	return nil
}
