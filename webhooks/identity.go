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
	// DefaultAgentGroup names the agent groups (for users and impersonated or proxied
	// identities; service-account tokens cannot carry custom groups): a member of
	// "planmode:agents:<namespace>" is an agent of that namespace only. A member of the bare
	// group is an agent of no namespace: its spec writes are refused like any agent's, and so
	// is every status.agent write.
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
	// AgentGroups: a member of "<group>:<namespace>" for any of these groups is an agent of
	// that namespace; a member of "<group>" itself is an agent of no namespace.
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

// AgentNamespaces is where an agent identity is an agent.
type AgentNamespaces []string

// Has reports whether ns is one of them.
func (a AgentNamespaces) Has(ns string) bool { return slices.Contains(a, ns) }

// IsAgent reports whether the user is an agent identity, and the namespaces it is an agent of:
// an agent service account's own; for a member of agent groups, the <namespace> of each
// "<group>:<namespace>" (none for a member of a bare agent group).
func (id Identities) IsAgent(u authenticationv1.UserInfo) (agent bool, in AgentNamespaces) {
	if ns, name, ok := splitServiceAccount(u.Username); ok && id.AgentServiceAccountPrefix != "" {
		if name == id.AgentServiceAccountPrefix || strings.HasPrefix(name, id.AgentServiceAccountPrefix+"-") {
			return true, AgentNamespaces{ns}
		}
	}
	for _, g := range u.Groups {
		for _, ag := range id.AgentGroups {
			if g == ag {
				agent = true
			} else if ns, ok := strings.CutPrefix(g, ag+":"); ok && ns != "" {
				agent, in = true, append(in, ns)
			}
		}
	}
	return agent, in
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
