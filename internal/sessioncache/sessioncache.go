// Package sessioncache lists the AgentSessions of a manager's informer cache without copying
// them, for walks over every session (the sessions a changed config, review policy or store
// affects, the claims at start).
// A client's List copies each object, or with UnsafeDisableDeepCopy still each object's struct
// into the list: garbage per session on every walk, which the informer's own store avoids.
package sessioncache

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// List returns the AgentSessions reader holds. From a cache (cache.Informers) they are the
// cache's own objects, which the caller must not change; from any other reader, a list read
// without deep copies where the reader allows it.
func List(ctx context.Context, reader client.Reader) ([]*agentsv1alpha1.AgentSession, error) {
	if ic, ok := reader.(cache.Informers); ok {
		inf, err := ic.GetInformer(ctx, &agentsv1alpha1.AgentSession{}, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, err
		}
		if st, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
			objs := st.GetStore().List()
			out := make([]*agentsv1alpha1.AgentSession, 0, len(objs))
			for _, o := range objs {
				if s, ok := o.(*agentsv1alpha1.AgentSession); ok {
					out = append(out, s)
				}
			}
			return out, nil
		}
	}
	var list agentsv1alpha1.AgentSessionList
	if err := reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*agentsv1alpha1.AgentSession, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}
