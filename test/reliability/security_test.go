package reliability

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
)

func repoFile(parts ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", ".."}, parts...)...)
}

// permissions flattens a ClusterRole's rules to sorted "group/resource:verb" strings.
func permissions(path string) []string {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	Expect(yaml.Unmarshal(b, &role)).To(Succeed())
	var out []string
	for _, r := range role.Rules {
		Expect(r.ResourceNames).To(BeEmpty())
		Expect(r.NonResourceURLs).To(BeEmpty())
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, fmt.Sprintf("%s/%s:%s", g, res, v))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

var _ = Describe("security", func() {
	It("gives the manager exactly the expected RBAC (config/rbac/role.yaml from controller-gen)", func() {
		Expect(permissions(repoFile("config", "rbac", "role.yaml"))).To(Equal([]string{
			"agents.harness.dev/agentsessions/status:get",
			"agents.harness.dev/agentsessions/status:patch",
			"agents.harness.dev/agentsessions/status:update",
			"agents.harness.dev/agentsessions:get",
			"agents.harness.dev/agentsessions:list",
			"agents.harness.dev/agentsessions:watch",
			"agents.harness.dev/planmodeconfigs:get",
			"agents.harness.dev/planmodeconfigs:list",
			"agents.harness.dev/planmodeconfigs:watch",
			"agents.harness.dev/reviewpolicies:get", // the namespace's review policy (docs/review.md)
			"agents.harness.dev/reviewpolicies:list",
			"agents.harness.dev/reviewpolicies:watch",
			"authentication.k8s.io/selfsubjectreviews:create",
			"authorization.k8s.io/subjectaccessreviews:create",
			"coordination.k8s.io/leases:create",
			"coordination.k8s.io/leases:delete",
			"coordination.k8s.io/leases:get",
			"coordination.k8s.io/leases:list",
			"coordination.k8s.io/leases:patch",
			"coordination.k8s.io/leases:update",
			"coordination.k8s.io/leases:watch",
			"events.k8s.io/events:create",
			"events.k8s.io/events:patch",
		}), "no write to spec, no Secrets, no wildcards: a change here needs a reason")
		Expect(permissions(repoFile("config", "rbac", "agentsession_agent_role.yaml"))).To(Equal([]string{
			"agents.harness.dev/agentsessions/status:get",
			"agents.harness.dev/agentsessions/status:patch",
			"agents.harness.dev/agentsessions/status:update",
			"agents.harness.dev/agentsessions:get",
			"agents.harness.dev/agentsessions:list",
			"agents.harness.dev/agentsessions:watch",
			"agents.harness.dev/planmodeconfigs:get",
			"agents.harness.dev/planmodeconfigs:list",
			"agents.harness.dev/planmodeconfigs:watch",
			"coordination.k8s.io/leases:create", // the agent's liveness Lease (docs/protocol.md, 11.1)
			"coordination.k8s.io/leases:delete",
			"coordination.k8s.io/leases:get",
			"coordination.k8s.io/leases:update",
		}))
	})

	It("runs the real manager under exactly that role, and keeps an agent identity out of spec and out of another session's status", func() {
		// The manager as an ordinary user bound to manager-role only.
		b, err := os.ReadFile(repoFile("config", "rbac", "role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var role rbacv1.ClusterRole
		Expect(yaml.Unmarshal(b, &role)).To(Succeed())
		role.Name = "reliability-manager-role"
		Expect(k8s.Create(suiteCtx, &role)).To(Succeed())
		Expect(k8s.Create(suiteCtx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reliability-manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "planmode-manager-under-test"}},
		})).To(Succeed())
		mu, err := testEnv.AddUser(envtest.User{Name: "planmode-manager-under-test"}, nil)
		Expect(err).NotTo(HaveOccurred())
		kc, err := mu.KubeConfig()
		Expect(err).NotTo(HaveOccurred())
		mkc := filepath.Join(workDir, "kubeconfig-least-privilege")
		Expect(os.WriteFile(mkc, kc, 0o600)).To(Succeed())

		url, err := pg.NewDatabase(suiteCtx, "rbac")
		Expect(err).NotTo(HaveOccurred())
		w := newWorkload("rbac", 2, url, nil)
		m := startManager(managerOpts{store: url, kubeconfig: mkc})
		w.startAgents()
		w.startDriver(1, 30, 100*time.Millisecond)
		w.waitDriver()
		recovery := w.settle(time.Minute)
		Expect(m.log()).NotTo(ContainSubstring("forbidden"), "the manager needed a permission role.yaml lacks")

		// The per-agent role of docs/protocol.md section 11: agent role rules with resourceNames.
		agentRole, err := os.ReadFile(repoFile("config", "rbac", "agentsession_agent_role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var ar rbacv1.ClusterRole
		Expect(yaml.Unmarshal(agentRole, &ar)).To(Succeed())
		r := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "agent-s0"}, Rules: ar.Rules}
		for i := range r.Rules {
			r.Rules[i].ResourceNames = []string{"s0"}
		}
		Expect(k8s.Create(suiteCtx, r)).To(Succeed())
		agentUser := "system:serviceaccount:" + w.ns + ":planmode-agent-s0"
		Expect(k8s.Create(suiteCtx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "agent-s0"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: agentUser}},
		})).To(Succeed())
		imp := rest.CopyConfig(cfg)
		imp.Impersonate = rest.ImpersonationConfig{UserName: agentUser, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		agent, err := client.New(imp, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		own := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}}
		other := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s1"}}
		report := mergePatch(`{"status":{"agent":{"boundary":{"turn":1,"step":1,"seq":0}}}}`)
		Expect(agent.Status().Patch(suiteCtx, own, report)).To(Succeed(), "its own status.agent")
		err = agent.Patch(suiteCtx, own, mergePatch(`{"spec":{"planMode":{"active":true}}}`))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an agent toggled its own spec: %v", err)
		err = agent.Status().Patch(suiteCtx, other, report)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an agent wrote another session's status: %v", err)
		err = agent.Patch(suiteCtx, other, mergePatch(`{"spec":{"planMode":{"active":true}}}`))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an agent wrote another session's spec: %v", err)
		w.report("manager under least-privilege RBAC", 1, recovery, "role.yaml as the manager's only permission; agent identity kept to its own status by RBAC")
	})

	It("serves webhooks over TLS 1.2 or newer only", func() {
		port := freePort()
		url, err := pg.NewDatabase(suiteCtx, "tls")
		Expect(err).NotTo(HaveOccurred())
		m := startManager(managerOpts{store: url, webhookPort: port, certDir: filepath.Join(workDir, "certs-tls"),
			extra: []string{"--webhook-host=127.0.0.1"}})
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		dial := func(minV, maxV uint16) (*tls.ConnectionState, error) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
				&tls.Config{MinVersion: minV, MaxVersion: maxV, InsecureSkipVerify: true}) //nolint:gosec // only the protocol version is under test
			if err != nil {
				return nil, err
			}
			defer func() { _ = c.Close() }()
			st := c.ConnectionState()
			return &st, nil
		}
		eventually(30*time.Second, func(g Gomega) {
			g.Expect(m.exited()).To(BeFalse(), "manager exited:\n%s", m.log())
			_, err := dial(tls.VersionTLS12, tls.VersionTLS13)
			g.Expect(err).NotTo(HaveOccurred())
		})
		for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
			_, err := dial(v, v)
			Expect(err).To(HaveOccurred(), "handshake with %s succeeded", tls.VersionName(v))
		}
		st, err := dial(tls.VersionTLS12, tls.VersionTLS12)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Version).To(Equal(uint16(tls.VersionTLS12)))
		st, err = dial(tls.VersionTLS12, tls.VersionTLS13)
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Version).To(Equal(uint16(tls.VersionTLS13)))
		Expect(st.NegotiatedProtocol).NotTo(Equal("h2"))
	})

	It("never shows the PostgreSQL password in manager logs, Events or status, through a store outage and a failed start", func() {
		const password = "S3cr3t-Pw-7f1c9e"
		base, err := pg.NewDatabase(suiteCtx, "secret")
		Expect(err).NotTo(HaveOccurred())
		// pgtest trusts local connections, so any password works; it must still never leak.
		url := strings.Replace(base, "postgres@", "postgres:"+password+"@", 1)
		Expect(url).To(ContainSubstring(password))
		w := newWorkload("secret", 2, base, nil)
		m := startManager(managerOpts{store: url, extra: []string{"--zap-log-level=debug"}})
		w.startAgents()
		w.startDriver(1, 0, 100*time.Millisecond)
		eventually(time.Minute, func(g Gomega) { g.Expect(w.steps.Load()).To(BeNumerically(">", 10)) })
		// Store errors reach logs, conditions and Events: make some.
		Expect(pg.Stop(30 * time.Second)).To(Succeed())
		x := !w.get("s0").Status.PlanMode.Active
		Expect(k8s.Patch(suiteCtx, &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "s0"}},
			mergePatch(fmt.Sprintf(`{"spec":{"planMode":{"active":%t}}}`, x)))).To(Succeed())
		eventually(30*time.Second, func(g Gomega) {
			g.Expect(m.log()).To(ContainSubstring("127.0.0.1"), "no store error logged yet")
			s := w.get("s0")
			g.Expect(s.Status.Conditions).To(ContainElement(HaveField("Reason", v1alpha1.ReasonLogStoreError)))
		})
		Expect(pg.Start(suiteCtx)).To(Succeed())
		w.settle(time.Minute)
		// A manager that cannot reach its store at all fails at start with the URL redacted.
		bad := startManager(managerOpts{store: strings.Replace(url, fmt.Sprint(pg.Port), "1", 1)})
		eventually(90*time.Second, func(g Gomega) { g.Expect(bad.exited()).To(BeTrue()) })

		var haystack strings.Builder
		haystack.WriteString(m.log())
		haystack.WriteString(bad.log())
		// The manager writes Events in the background: wait until some have landed, so the
		// search below has them to look at.
		var evs eventsv1.EventList
		var cevs corev1.EventList
		eventually(30*time.Second, func(g Gomega) {
			g.Expect(k8s.List(suiteCtx, &evs, client.InNamespace(w.ns))).To(Succeed())
			g.Expect(k8s.List(suiteCtx, &cevs, client.InNamespace(w.ns))).To(Succeed())
			g.Expect(len(evs.Items)+len(cevs.Items)).To(BeNumerically(">", 0), "no Events to look at")
		})
		var sessions v1alpha1.AgentSessionList
		Expect(k8s.List(suiteCtx, &sessions, client.InNamespace(w.ns))).To(Succeed())
		for _, v := range []any{evs, cevs, sessions} {
			b, _ := json.Marshal(v)
			haystack.Write(b)
		}
		Expect(haystack.String()).To(ContainSubstring("LogStoreUnavailable"), "the outage left no trace to look at")
		Expect(haystack.String()).NotTo(ContainSubstring(password))
		GinkgoWriter.Printf("searched %d bytes of logs, %d Events and %d sessions: no password\n", haystack.Len(), len(evs.Items)+len(cevs.Items), len(sessions.Items))
	})
})
