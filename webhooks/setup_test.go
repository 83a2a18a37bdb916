package webhooks

import (
	"flag"
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
)

func TestBindFlags(t *testing.T) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	err := fs.Parse([]string{
		"--webhook-manager-username=system:serviceaccount:ops:mgr, admin@example.com",
		"--webhook-manager-username=other",
		"--webhook-agent-group=team:agents",
		"--webhook-cert-host=planmode-webhook-service.planmode-system.svc",
		"--webhook-cert-dir=/certs", "--webhook-disable-cert-generate", "--webhook-port=9444",
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"system:serviceaccount:ops:mgr", "admin@example.com", "other"}; !slices.Equal(o.ManagerUsernames, want) {
		t.Fatalf("manager usernames %q, want %q", o.ManagerUsernames, want)
	}
	if want := []string{"team:agents"}; !slices.Equal(o.AgentGroups, want) {
		t.Fatalf("a given flag replaces the default: agent groups %q", o.AgentGroups)
	}
	if want := []string{"planmode-webhook-service.planmode-system.svc"}; !slices.Equal(o.CertHosts, want) {
		t.Fatalf("cert hosts %q", o.CertHosts)
	}
	if o.CertDir != "/certs" || !o.DisableCertGenerate || o.Port != 9444 || o.AgentServiceAccountPrefix != DefaultAgentServiceAccountPrefix {
		t.Fatalf("options %+v", o)
	}
	if !o.RequireAgentBinding {
		t.Fatal("agent binding must be required by default")
	}
	off := DefaultOptions()
	fs = flag.NewFlagSet("manager", flag.ContinueOnError)
	off.BindFlags(fs)
	if err := fs.Parse([]string{"--webhook-require-agent-binding=false"}); err != nil || off.RequireAgentBinding {
		t.Fatalf("turning binding off is an explicit flag: %v, %v", err, off.RequireAgentBinding)
	}
}

func TestIdentities(t *testing.T) {
	ids := Identities{ManagerUsernames: []string{DefaultManagerUsername("planmode-system")}, AgentGroups: []string{DefaultAgentGroup},
		AgentServiceAccountPrefix: DefaultAgentServiceAccountPrefix}
	for _, tc := range []struct {
		user    authenticationv1.UserInfo
		agent   bool
		ns      []string
		manager bool
	}{
		{authenticationv1.UserInfo{Username: "system:serviceaccount:planmode-system:planmode-controller-manager"}, false, nil, true},
		{authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:planmode-agent"}, true, []string{"team-a"}, false},
		{authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:planmode-agent-7f9c"}, true, []string{"team-a"}, false},
		{authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:planmode-agentx"}, false, nil, false},
		{authenticationv1.UserInfo{Username: "system:serviceaccount:team-a:planmode-agent:x"}, false, nil, false},
		{authenticationv1.UserInfo{Username: "planmode-agent"}, false, nil, false},
		// A bare group member is an agent of no namespace; a namespaced group's, of that one.
		{authenticationv1.UserInfo{Username: "bot@example.com", Groups: []string{"system:authenticated", DefaultAgentGroup}}, true, nil, false},
		{authenticationv1.UserInfo{Username: "bot@example.com", Groups: []string{DefaultAgentGroup + ":team-a", DefaultAgentGroup + ":team-b"}}, true, []string{"team-a", "team-b"}, false},
		{authenticationv1.UserInfo{Username: "bot@example.com", Groups: []string{DefaultAgentGroup + ":"}}, false, nil, false},
		{authenticationv1.UserInfo{Username: "bot@example.com", Groups: []string{DefaultAgentGroup + "s:team-a"}}, false, nil, false},
		{authenticationv1.UserInfo{Username: "ed@example.com", Groups: []string{"system:authenticated"}}, false, nil, false},
	} {
		agent, ns := ids.IsAgent(tc.user)
		if agent != tc.agent || !slices.Equal(ns, tc.ns) || ids.IsManager(tc.user) != tc.manager {
			t.Errorf("%+v: agent=%v ns=%q manager=%v", tc.user, agent, ns, ids.IsManager(tc.user))
		}
	}
	if agent, _ := (Identities{}).IsAgent(authenticationv1.UserInfo{Username: "system:serviceaccount:a:planmode-agent"}); agent {
		t.Error("an empty prefix disables the naming convention")
	}
}

func TestManagerIdentityDefault(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ops")
	ids, err := DefaultOptions().identities(nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"system:serviceaccount:ops:planmode-controller-manager"}; !slices.Equal(ids.ManagerUsernames, want) {
		t.Fatalf("got %q", ids.ManagerUsernames)
	}
	o := DefaultOptions()
	o.ManagerUsernames = []string{" "}
	if _, err := o.identities(nil); err == nil {
		t.Fatal("a blank manager username must be refused")
	}
}
