package agentsdk

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Lease keeps an agent's liveness Lease (docs/protocol.md, "Agent liveness"): it holds the Lease
// named v1alpha1.AgentLeaseName(session) in the session's namespace, renews it every
// v1alpha1.AgentLeaseRenewInterval, and deletes it on Stop, so the manager and kubectl plan can
// tell a reviewer that no agent waits for a plan. Renewing is one write per interval, never per
// step; a failed renewal is logged and retried, and never stops the agent. An agent starts it
// beside its Client (StartLease); it is separate so that the protocol's own API traffic stays
// what docs/protocol.md counts.
type Lease struct {
	leases   coordinationclient.LeaseInterface
	name     string
	session  string
	holder   string
	interval time.Duration
	log      logr.Logger
	cancel   context.CancelFunc
	done     chan struct{}
}

// StartLease starts renewing the liveness Lease of the AgentSession ns/session as cfg's
// identity (the agent's), until Stop or ctx ends.
func StartLease(ctx context.Context, cfg *rest.Config, ns, session string, log logr.Logger) (*Lease, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("agentsdk: liveness Lease client: %w", err)
	}
	host, _ := os.Hostname()
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Lease{
		leases: cs.CoordinationV1().Leases(ns), name: v1alpha1.AgentLeaseName(session), session: session,
		holder: fmt.Sprintf("%s/%s", host, NewID()), interval: v1alpha1.AgentLeaseRenewInterval, log: log,
		cancel: cancel, done: make(chan struct{}),
	}
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-rctx.Done():
		}
	}()
	go l.run(rctx)
	return l, nil
}

// Name is the Lease's name.
func (l *Lease) Name() string { return l.name }

// Stop stops renewing and deletes the Lease (if this process still holds it), so the agent is
// gone at once rather than a lease duration later.
func (l *Lease) Stop() {
	l.cancel()
	<-l.done
}

func (l *Lease) run(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		if err := l.renew(ctx); err != nil && ctx.Err() == nil {
			l.log.Error(err, "renew the agent liveness Lease", "lease", l.name)
		}
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			l.release(dctx)
			cancel()
			return
		case <-t.C:
		}
	}
}

// renew writes renewTime now, creating the Lease, or taking it over from an earlier process of
// this session's agent.
func (l *Lease) renew(ctx context.Context) error {
	now := metav1.NewMicroTime(time.Now())
	cur, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = l.leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Labels: map[string]string{v1alpha1.AgentLeaseSessionLabel: l.session}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &l.holder, LeaseDurationSeconds: ptr.To(int32(v1alpha1.AgentLeaseDuration / time.Second)),
				AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
		cur.Spec.HolderIdentity, cur.Spec.AcquireTime = &l.holder, &now
	}
	cur.Spec.RenewTime, cur.Spec.LeaseDurationSeconds = &now, ptr.To(int32(v1alpha1.AgentLeaseDuration/time.Second))
	_, err = l.leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// release deletes the Lease if this process still holds it: the agent is gone at once, not a
// lease duration later.
func (l *Lease) release(ctx context.Context) {
	cur, err := l.leases.Get(ctx, l.name, metav1.GetOptions{})
	if err != nil || cur.Spec.HolderIdentity == nil || *cur.Spec.HolderIdentity != l.holder {
		return
	}
	err = l.leases.Delete(ctx, l.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		l.log.Error(err, "release the agent liveness Lease", "lease", l.name)
	}
}
