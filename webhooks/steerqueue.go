package webhooks

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/steerid"
)

// User messages (spec.steerQueue) are delivered once each, in order, and the agent records the
// last one it delivered in status.agent.steerID. An id is used once for the session's life
// (docs/protocol.md, section 10): each message a write adds must take an id after every id the
// session has used (pkg/steerid's order), which is the larger of the queue's last id and
// status.agent.steerID, so the webhook needs no record of the ids writers have dropped. A
// reused id would be taken for delivered and never reach the agent.

// validateSteerQueue checks the messages a create or an update adds to spec.steerQueue (oldObj
// nil: a create, where every message is new): each id after the session's last used id and
// after the message before it, every new message after the ones kept, and a kept message
// unchanged (its id may have been delivered with its old text).
func validateSteerQueue(oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	var errs field.ErrorList
	kept := map[string]agentsv1alpha1.SteerMessage{}
	last := ""
	if oldObj != nil {
		for _, m := range oldObj.Spec.SteerQueue {
			kept[m.ID] = m
			last = steerid.Max(last, m.ID)
		}
		if a := oldObj.Status.Agent; a != nil {
			last = steerid.Max(last, a.SteerID)
		}
	}
	// No new message may come before a kept one: the agent delivers those after the last
	// delivered in queue order, so an earlier position could be passed over.
	lastKept := -1
	for i, m := range obj.Spec.SteerQueue {
		if _, ok := kept[m.ID]; ok {
			lastKept = i
		}
	}
	for i, m := range obj.Spec.SteerQueue {
		p := field.NewPath("spec", "steerQueue").Index(i)
		if was, ok := kept[m.ID]; ok {
			if !equality.Semantic.DeepEqual(was, m) {
				errs = append(errs, field.Invalid(p.Child("id"), m.ID,
					"this message changed but its id did not: the agent may have delivered it already, so a changed message needs a new id (kubectl plan message sends one)"))
			}
			continue
		}
		switch {
		case i < lastKept:
			errs = append(errs, field.Invalid(p.Child("id"), m.ID, fmt.Sprintf(
				"a new message must come after the messages already queued (after %q at index %d): the agent delivers them in order", obj.Spec.SteerQueue[lastKept].ID, lastKept)))
		case last != "" && !steerid.After(m.ID, last):
			errs = append(errs, field.Invalid(p.Child("id"), m.ID, fmt.Sprintf(
				"must sort after %q, the last id this session has used (the queue's last or status.agent.steerID): a message id is used once for the session's life, "+
					"and one at or before it would be taken for delivered; use an id such as %q (numbers compare by value, so m9 < m10; kubectl plan message chooses one)",
				last, steerid.Next("m-", last, time.Now()))))
		}
		if steerid.After(m.ID, last) || last == "" {
			last = m.ID
		}
	}
	return errs
}

// validateSteerID: status.agent.steerID records the last user message the agent delivered, so
// it may only change to the id of a message of this session (spec.steerQueue); any other value
// would mark a message delivered that never was.
func validateSteerID(oldObj, obj *agentsv1alpha1.AgentSession) field.ErrorList {
	var was, now string
	if a := oldObj.Status.Agent; a != nil {
		was = a.SteerID
	}
	if a := obj.Status.Agent; a != nil {
		now = a.SteerID
	}
	if now == was || now == "" {
		return nil
	}
	for _, m := range obj.Spec.SteerQueue {
		if m.ID == now {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(field.NewPath("status", "agent", "steerID"), now,
		"no message of this session has that id (spec.steerQueue): the agent records only the id of the message it delivered")}
}
