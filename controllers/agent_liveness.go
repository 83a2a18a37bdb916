package controllers

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Agent liveness for a plan under review (docs/protocol.md, "Agent liveness"): a running agent
// renews a Lease; while a review is pending, the manager reads it and records in status.review
// whether the agent that waits for the decision is still there. The Lease is read past the
// cache (one read per reconcile of a session under review, the rare case): caching Leases would
// mean watching every Lease of the cluster, node heartbeats included.

// leaseReadTimeout bounds the Lease read; a review is not held up by it.
const leaseReadTimeout = 2 * time.Second

// reviewAgentLiveness records whether the pending review's agent is connected, and asks to look
// again when its Lease would expire.
func (sc *sessionScope) reviewAgentLiveness(rs *agentsv1alpha1.ReviewStatus, now metav1.Time) ctrl.Result {
	if sc.r.APIReader == nil || rs.Phase != agentsv1alpha1.ReviewPending {
		return ctrl.Result{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseReadTimeout)
	defer cancel()
	var l coordinationv1.Lease
	err := sc.r.APIReader.Get(ctx, types.NamespacedName{Namespace: sc.session.Namespace, Name: agentsv1alpha1.AgentLeaseName(sc.session.Name)}, &l)
	was := rs.AgentConnected
	var expires time.Time
	switch {
	case apierrors.IsNotFound(err) && was == nil:
		return ctrl.Result{} // an agent that keeps no Lease: unknown
	case apierrors.IsNotFound(err):
		rs.AgentConnected = ptrTo(false) // released when the agent closed
	case err != nil:
		return ctrl.Result{RequeueAfter: policyRetry} // keep what is recorded; look again
	default:
		var ok bool
		if expires, ok = leaseExpiry(&l); !ok {
			return ctrl.Result{}
		}
		renewed := metav1.NewTime(l.Spec.RenewTime.Time)
		rs.AgentRenewedAt, rs.AgentConnected = &renewed, ptrTo(now.Time.Before(expires))
	}
	if *rs.AgentConnected {
		return ctrl.Result{RequeueAfter: expires.Sub(now.Time) + time.Second}
	}
	if was == nil || *was {
		since := "its Lease was released"
		if rs.AgentRenewedAt != nil {
			since = "its Lease was last renewed at " + rs.AgentRenewedAt.UTC().Format(time.RFC3339)
		}
		sc.emit(corev1.EventTypeWarning, EventReasonReviewAgentGone, "Review", fmt.Sprintf(
			"the agent that posted plan review %s (revision %d) is gone (%s): no agent waits for the decision", rs.ID, rs.Revision, since))
	}
	return ctrl.Result{}
}

// leaseExpiry is when the Lease expires: its renewal time plus its duration.
func leaseExpiry(l *coordinationv1.Lease) (time.Time, bool) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second), true
}

func ptrTo[T any](v T) *T { return &v }
