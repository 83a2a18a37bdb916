package sessionwatch

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// NewInformerFunc is a cache.Options.NewInformer: the AgentSession informer lists and watches
// through ListWatch, every other kind through the ListerWatcher controller-runtime built. It
// serves a cache whose AgentSessions are cluster-wide, selected by selector (nil: all of them),
// as the manager's cache is: controller-runtime's own ListerWatcher, which it replaces, would
// apply a namespace or field selector this one does not know of.
func NewInformerFunc(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme, selector labels.Selector) (
	func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer, error,
) {
	sessions, err := ListWatch(cfg, httpClient, scheme, selector)
	if err != nil {
		return nil, err
	}
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if _, ok := obj.(*agentsv1alpha1.AgentSession); ok {
			lw = sessions
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}, nil
}

// ListWatch lists and watches the AgentSessions selector selects (nil: all) in every namespace,
// decoding them with this package's decoder.
func ListWatch(cfg *rest.Config, httpClient *http.Client, scheme *runtime.Scheme, selector labels.Selector) (*toolscache.ListWatch, error) {
	c := rest.CopyConfig(cfg)
	gv := agentsv1alpha1.GroupVersion
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	ns, err := newNegotiatedSerializer(scheme)
	if err != nil {
		return nil, err
	}
	c.NegotiatedSerializer = ns
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("the AgentSession watch's REST client: %w", err)
	}
	params := runtime.NewParameterCodec(scheme)
	selected := func(opts *metav1.ListOptions) *metav1.ListOptions {
		if selector != nil && !selector.Empty() {
			opts.LabelSelector = selector.String()
		}
		return opts
	}
	resource := agentsv1alpha1.AgentSessionResource.Resource
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &agentsv1alpha1.AgentSessionList{}
			err := client.Get().Resource(resource).VersionedParams(selected(&opts), params).Do(ctx).Into(list)
			if err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			opts.AllowWatchBookmarks = true
			return client.Get().Resource(resource).VersionedParams(selected(&opts), params).Watch(ctx)
		},
	}, nil
}
