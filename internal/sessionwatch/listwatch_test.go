package sessionwatch

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// TestACacheOfSessionsReadsWhatTheAPIServerHolds runs controller-runtime's cache as the manager
// does, its AgentSession informer on this package's ListWatch, against a real API server: it
// holds the selected sessions of every namespace, each as a client reads it, and follows their
// changes and deletions.
func TestACacheOfSessionsReadsWhatTheAPIServerHolds(t *testing.T) {
	ctrllog.SetLogger(testr.New(t))
	env, cfg, err := framework.Start(framework.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	scheme := testScheme(t)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	const shardLabel = "planmode.harness.dev/shard"
	for _, ns := range []string{"team-a", "team-b"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		for i, shard := range []string{"a", "b", "a"} {
			s := &agentsv1alpha1.AgentSession{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("s%d", i), Labels: map[string]string{shardLabel: shard}},
				Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: fmt.Sprintf("%s-%d", ns, i)},
			}
			if err := c.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}

	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	selector := labels.SelectorFromSet(labels.Set{shardLabel: "a"})
	newInformer, err := NewInformerFunc(cfg, httpClient, scheme, selector)
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := cache.New(cfg, cache.Options{
		Scheme: scheme, HTTPClient: httpClient, NewInformer: newInformer,
		ByObject: map[client.Object]cache.ByObject{&agentsv1alpha1.AgentSession{}: {Label: selector}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.GetInformer(ctx, &agentsv1alpha1.AgentSession{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = sessions.Start(ctx) }()
	if !sessions.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}

	// cached is the selected sessions as the cache holds them and as a client reads them.
	cached := func() (got, want map[string]agentsv1alpha1.AgentSession) {
		var inCache, live agentsv1alpha1.AgentSessionList
		if err := sessions.List(ctx, &inCache); err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, &live, client.MatchingLabelsSelector{Selector: selector}); err != nil {
			t.Fatal(err)
		}
		got, want = map[string]agentsv1alpha1.AgentSession{}, map[string]agentsv1alpha1.AgentSession{}
		for _, s := range inCache.Items {
			s.TypeMeta = metav1.TypeMeta{} // the cache's reader sets it, the client's list does not
			got[s.Namespace+"/"+s.Name] = s
		}
		for _, s := range live.Items {
			s.TypeMeta = metav1.TypeMeta{}
			want[s.Namespace+"/"+s.Name] = s
		}
		return got, want
	}
	holdsTheLiveSessions := func(what string) {
		t.Helper()
		var got, want map[string]agentsv1alpha1.AgentSession
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			got, want = cached()
			return reflect.DeepEqual(got, want), nil
		})
		if err != nil {
			t.Fatalf("%s: the cache does not hold the sessions a client lists (-client +cache):\n%s", what, cmp.Diff(want, got))
		}
	}
	holdsTheLiveSessions("after the first list")
	if got, _ := cached(); len(got) != 4 {
		t.Fatalf("the cache holds %d sessions, not the 4 of shard a", len(got))
	}

	s := &agentsv1alpha1.AgentSession{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "s0"}, s); err != nil {
		t.Fatal(err)
	}
	s.Spec.PlanMode.Active = ptr(true)
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	s.Status.ObservedGeneration = s.Generation
	if err := c.Status().Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	holdsTheLiveSessions("after a spec and a status update")
	if err := c.Delete(ctx, &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "s2"}}); err != nil {
		t.Fatal(err)
	}
	holdsTheLiveSessions("after a deletion")
	if got, _ := cached(); len(got) != 3 {
		t.Fatalf("after a deletion the cache holds %d sessions, not 3", len(got))
	}
}

func ptr[T any](v T) *T { return &v }
