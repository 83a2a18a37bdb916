package main

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// benchGroup holds the benchmark's ordinary identities under -apf.
const benchGroup = "planmode-scale"

// identities are who the manager and floor processes, the agents and the user are.
type identities struct {
	procs  *envtest.AuthenticatedUser
	agents *rest.Config
	user   *rest.Config
}

// newIdentities makes them. With apf (the benchmark's default) they are three ordinary users of
// one group bound to cluster-admin, so each is one flow of the global-default priority level,
// queued and, past its queues, refused with 429 as a cluster's users and service accounts are.
// (All agents share one identity, as agent pods that share a service account do.) Without it
// all three are system:masters, which API Priority and Fairness exempts: the API server then
// runs every request at once however many arrive, and cannot take 10,000 toggles at once.
func newIdentities(ctx context.Context, env *envtest.Environment, admin *rest.Config, apf bool) (*identities, error) {
	groups := []string{"system:masters"}
	if apf {
		groups = []string{benchGroup}
		k, err := client.New(admin, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		if err := k.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "planmode-scale-cluster-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: benchGroup}},
		}); err != nil {
			return nil, fmt.Errorf("bind %s to cluster-admin: %w", benchGroup, err)
		}
	}
	add := func(name string) (*envtest.AuthenticatedUser, error) {
		u, err := env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
		if err != nil {
			return nil, fmt.Errorf("add user %s: %w", name, err)
		}
		return u, nil
	}
	procs, err := add("planmode-scale-manager")
	if err != nil {
		return nil, err
	}
	ids := &identities{procs: procs, agents: admin, user: admin}
	if apf {
		for _, c := range []struct {
			name string
			cfg  **rest.Config
		}{{"planmode-scale-agents", &ids.agents}, {"planmode-scale-user", &ids.user}} {
			u, err := add(c.name)
			if err != nil {
				return nil, err
			}
			cfg := u.Config()
			cfg.QPS, cfg.Burst = -1, 0
			*c.cfg = cfg
		}
	}
	return ids, nil
}
