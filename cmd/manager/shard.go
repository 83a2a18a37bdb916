package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/sessionwatch"
)

// Sharding: a deployment may split AgentSessions across several managers, each with its own
// --shard-selector (a label selector such as planmode.harness.dev/shard=a). A manager's cache
// lists and watches only the AgentSessions its selector matches, so it reconciles, appends for
// and holds in memory only its shard; PlanModeConfigs stay cluster-wide (every shard needs the
// guidance of its sessions). Each shard elects its own leader: unless --leader-election-id is
// given, the Lease name gets a suffix derived from the selector. See docs/performance.md.

// ShardLabel is the label the documented sharding scheme uses (any label selector works).
const ShardLabel = "planmode.harness.dev/shard"

func bindShardFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.shardSelector, "shard-selector", "",
		"Label selector of the AgentSessions this manager handles, e.g. "+ShardLabel+"=a (empty: all). "+
			"Run one manager Deployment per shard with disjoint selectors; each elects its own leader.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of the net/http/pprof endpoint ('0' disables it; profiling only).")
}

// checkShard parses --shard-selector; an empty selector means every session.
func checkShard(o *options) []string {
	if o.shardSelector == "" {
		return nil
	}
	sel, err := labels.Parse(o.shardSelector)
	if err != nil {
		return []string{fmt.Sprintf("--shard-selector %q is not a label selector (%v); use for example %s=a", o.shardSelector, err, ShardLabel)}
	}
	if sel.Empty() {
		return []string{fmt.Sprintf("--shard-selector %q selects everything; leave it empty for an unsharded manager", o.shardSelector)}
	}
	return nil
}

// cacheOptions is the manager's cache: managedFields and last-applied-configuration are
// dropped from every cached object (stripForCache), and with a shard selector only that
// shard's AgentSessions are listed and watched.
func cacheOptions(o *options) cache.Options {
	opts := cache.Options{DefaultTransform: stripForCache}
	if sel := shardSelector(o); sel != nil {
		opts.ByObject = map[client.Object]cache.ByObject{&agentsv1alpha1.AgentSession{}: {Label: sel}}
	}
	return opts
}

// newCache builds the cache of cacheOptions. With --session-decoder=jsonv2 its AgentSession
// informer lists and watches through sessionwatch, on the manager's HTTP client, which the cache
// is given: the cache's AgentSessions are cluster-wide, selected by the shard selector alone,
// which is what sessionwatch's ListWatch applies.
func newCache(o *options) cache.NewCacheFunc {
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		if o.sessionDecoder == "jsonv2" {
			var err error
			opts.NewInformer, err = sessionwatch.NewInformerFunc(cfg, opts.HTTPClient, opts.Scheme, shardSelector(o))
			if err != nil {
				return nil, err
			}
		}
		return cache.New(cfg, opts)
	}
}

// shardSelector is --shard-selector parsed, nil when empty.
func shardSelector(o *options) labels.Selector {
	if o.shardSelector == "" {
		return nil
	}
	sel, _ := labels.Parse(o.shardSelector) // checked by checkShard
	return sel
}

// stripForCache drops what the manager never reads from every object before it is cached:
// managedFields, and kubectl's last-applied-configuration annotation (a full copy of the
// object's applied spec on every session created with kubectl apply); and it shares the
// strings that repeat across AgentSessions (intern.go).
func stripForCache(in any) (any, error) {
	in, err := cache.TransformStripManagedFields()(in)
	if err != nil {
		return in, err
	}
	if s, ok := in.(*agentsv1alpha1.AgentSession); ok {
		cacheStrings.internSession(s)
	}
	if obj, ok := in.(metav1.Object); ok {
		if a := obj.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
				obj.SetAnnotations(a)
			}
		}
	}
	return in, nil
}

// leaderElectionID is the Lease name: the flag's value when set explicitly; otherwise the
// default, suffixed per shard so that shards do not contend for one Lease.
func leaderElectionID(fs *flag.FlagSet, o *options) string {
	if o.shardSelector == "" || flagSet(fs, "leader-election-id") {
		return o.leaderElectionID
	}
	return shardLeaseID(o.leaderElectionID, o.shardSelector)
}

// shardLeaseID appends a short hash of the normalised selector (a Lease name is a DNS
// subdomain; a selector is not).
func shardLeaseID(base, selector string) string {
	sel, err := labels.Parse(selector)
	if err == nil {
		selector = sel.String()
	}
	sum := sha256.Sum256([]byte(selector))
	return base + "-shard-" + hex.EncodeToString(sum[:])[:10]
}
