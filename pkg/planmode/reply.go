package planmode

import "github.com/harness-dev/planmode-operator/pkg/harness"

// PlanCommandReply is the /plan command's reply for the outcome of Set. off is true for the
// exact trimmed argument "off"; logged is the committed state before the call (it only
// matters for an "off" noop).
func PlanCommandReply(off bool, outcome Outcome, logged bool) string {
	if !off {
		if outcome == Committed {
			return harness.ReplyOnCommitted
		}
		// queued, cancelled and noop all answer with the deferred copy (a harness quirk for
		// noop on an already-active idle session, kept on purpose).
		return harness.ReplyOnDeferred
	}
	switch outcome {
	case Committed:
		return harness.ReplyOffCommitted
	case Queued:
		return harness.ReplyOffDeferred
	case Cancelled:
		return harness.ReplyOffCancelled
	default: // noop
		if logged {
			return harness.ReplyOffDeferred
		}
		return harness.ReplyOffAlreadyOff
	}
}
