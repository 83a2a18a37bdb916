package agentsdk

import (
	"context"
	"errors"
	"fmt"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// ErrSessionIDInUse is returned by New when the log of the AgentSession's spec.sessionID
// belongs to another AgentSession (one log per session; the manager stops such a session with SessionIDInUse).
var ErrSessionIDInUse = errors.New("spec.sessionID is the log of another AgentSession")

// claimLog records the watched AgentSession as the owner of its log, as the manager does, so an
// agent never writes into the log of another session that names the same spec.sessionID.
func (c *Client) claimLog(ctx context.Context, s *v1alpha1.AgentSession) error {
	me := sessionlog.Owner{Namespace: s.Namespace, Name: s.Name, UID: string(s.UID)}
	holder, err := c.store.ClaimOwner(ctx, s.Spec.SessionID, me)
	if err != nil {
		return fmt.Errorf("agentsdk: record %s/%s as the owner of session %q's log: %w", s.Namespace, s.Name, s.Spec.SessionID, err)
	}
	if !holder.SameSession(me) {
		return fmt.Errorf("%w: AgentSession %s/%s names session %q, whose log belongs to another AgentSession; "+
			"delete it and create it with a spec.sessionID of its own", ErrSessionIDInUse, s.Namespace, s.Name, s.Spec.SessionID)
	}
	return nil
}
