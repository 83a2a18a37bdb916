package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/harness-dev/planmode-operator/webhooks"
)

// The demo agent runs as a service account of its own, as an agent pod does in a cluster: the
// demo session names it in spec.agent, the agent roles of config/rbac are bound to it in the
// demo namespace, and its kubeconfig holds a token the API server issued for it. The manager's
// webhook requires that binding by default, so no other identity can write the session's
// status.agent.

// agentRoles are the ClusterRoles of config/rbac an agent is bound to in its namespace.
var agentRoles = []string{"agentsession_agent_role.yaml", "agentsession_agent_images_role.yaml"}

// agentTokenLifetime is how long the demo agent's token lasts; each run issues a new one.
const agentTokenLifetime = 7 * 24 * 60 * 60

// demoAgentServiceAccount is the service account the demo session's agent runs as.
func demoAgentServiceAccount(session string) string {
	return webhooks.DefaultAgentServiceAccountPrefix + "-" + session
}

// issueAgentKubeconfig creates the demo agent's service account and role bindings when absent
// and writes a kubeconfig at path with a new token for it.
func issueAgentKubeconfig(ctx context.Context, cp *controlPlane, o options, path string) error {
	sa := demoAgentServiceAccount(o.session)
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: sa}}
	if err := cp.client.Create(ctx, account); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the demo agent's service account %s/%s: %w", o.namespace, sa, err)
	}
	rbacDir := filepath.Join(o.crdDir, "..", "..", "rbac")
	for _, f := range agentRoles {
		role, err := readClusterRole(filepath.Join(rbacDir, f))
		if err != nil {
			return err
		}
		if err := createOrKeep(ctx, cp.client, role); err != nil {
			return fmt.Errorf("install ClusterRole %s: %w", role.Name, err)
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: sa + "-" + role.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: o.namespace, Name: sa}},
		}
		if err := createOrKeep(ctx, cp.client, binding); err != nil {
			return fmt.Errorf("bind ClusterRole %s to %s/%s: %w", role.Name, o.namespace, sa, err)
		}
	}
	cs, err := kubernetes.NewForConfig(cp.cfg)
	if err != nil {
		return err
	}
	tr, err := cs.CoreV1().ServiceAccounts(o.namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(agentTokenLifetime))},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("issue a token for the demo agent's service account %s/%s: %w", o.namespace, sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cp.cfg.Host, CertificateAuthorityData: cp.cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["agent"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: sa, Namespace: o.namespace}
	kc.CurrentContext = "agent"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func readClusterRole(path string) (*rbacv1.ClusterRole, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the agent role (run make run from the repository): %w", err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &role, nil
}

func createOrKeep(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
