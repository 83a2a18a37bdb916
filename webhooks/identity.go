package webhooks

import (
	"fmt"
	"os"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
)

const (
	// DefaultManagerServiceAccount is the manager's service account name (config/rbac).
	DefaultManagerServiceAccount = "planmode-controller-manager"
	// DefaultAgentGroup is the group whose members are agent identities (for users and
	// impersonated or proxied identities; service-account tokens cannot carry custom groups).
	DefaultAgentGroup = "planmode:agents"
	// DefaultAgentServiceAccountPrefix marks agent service accounts by name: "planmode-agent" and
	// "planmode-agent-<anything>" in the session's namespace.
	DefaultAgentServiceAccountPrefix = "planmode-agent"

	serviceAccountUserPrefix = "system:serviceaccount:"
	inClusterNamespaceFile   = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// Identities says who is the manager and who is an agent, by the user info the API server puts
// in each admission request.
type Identities struct {
	// ManagerUsernames may write every part of an AgentSession's status.
	ManagerUsernames []string
	// AgentGroups: a member of any of these groups is an agent identity.
	AgentGroups []string
	// AgentServiceAccountPrefix: a service account whose name is this prefix, or this prefix
	// followed by "-", is an agent identity. Empty disables the naming convention.
	AgentServiceAccountPrefix string
}

// DefaultManagerUsername is the manager's service-account username in namespace ns.
func DefaultManagerUsername(ns string) string {
	return serviceAccountUserPrefix + ns + ":" + DefaultManagerServiceAccount
}

// ManagerNamespace is the namespace the manager runs in: $POD_NAMESPACE, else the in-cluster
// service-account namespace file, else "" (a local run).
func ManagerNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// IsManager reports whether the user is the manager.
func (id Identities) IsManager(u authenticationv1.UserInfo) bool {
	return slices.Contains(id.ManagerUsernames, u.Username)
}

// IsAgent reports whether the user is an agent identity, and for an agent service account its
// namespace ("" for a group member).
func (id Identities) IsAgent(u authenticationv1.UserInfo) (agent bool, saNamespace string) {
	if ns, name, ok := splitServiceAccount(u.Username); ok && id.AgentServiceAccountPrefix != "" {
		if name == id.AgentServiceAccountPrefix || strings.HasPrefix(name, id.AgentServiceAccountPrefix+"-") {
			return true, ns
		}
	}
	for _, g := range u.Groups {
		if slices.Contains(id.AgentGroups, g) {
			return true, ""
		}
	}
	return false, ""
}

func (id Identities) validate() error {
	if len(id.ManagerUsernames) == 0 {
		return fmt.Errorf("no manager username: set --webhook-manager-username (or POD_NAMESPACE for the default %q)",
			DefaultManagerUsername("<namespace>"))
	}
	for _, u := range id.ManagerUsernames {
		if strings.TrimSpace(u) == "" {
			return fmt.Errorf("empty manager username in %q", id.ManagerUsernames)
		}
	}
	return nil
}

func splitServiceAccount(username string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(username, serviceAccountUserPrefix)
	if !found {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	if !ok || ns == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return ns, name, true
}
