package webhooks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// Identities used across the envtest specs. Each is reached through impersonation, so the API
// server runs authentication-derived admission (user info) and RBAC exactly as in a cluster.
const (
	managerNS       = "planmode-system"
	testNS          = "team-a"
	otherNS         = "team-b"
	viewerUser      = "viv@example.com"
	editorUser      = "ed@example.com"
	reviewerUser    = "rita@example.com"
	agentGroupUser  = "bot@example.com" // an agent by group membership, with editor rights too
	agentSAName     = "planmode-agent"
	foreignAgentSA  = "planmode-agent-x"
	testManagerName = "planmode-controller-manager"
)

var (
	managerUser = DefaultManagerUsername(managerNS)
	agentUser   = "system:serviceaccount:" + testNS + ":" + agentSAName
	foreignUser = "system:serviceaccount:" + otherNS + ":" + foreignAgentSA

	testEnv     *envtest.Environment
	cfg         *rest.Config
	adminC      client.Client
	suiteReader client.Reader // the webhook manager's API reader, which the webhook lists with
	scheme      = runtime.NewScheme()
	suiteCtx    context.Context
	cancelMgr   context.CancelFunc
	kubeconfig  string
	repoRoot    = filepath.Join("..")
)

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Webhooks Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(agentsv1alpha1.AddToScheme(scheme)).To(Succeed())

	var err error
	testEnv, cfg, err = framework.Start(framework.Options{Webhooks: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(testEnv.Stop()).To(Succeed()) })

	adminC, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// The webhook server under test: the production NewServer on envtest's serving certificate
	// (EnsureServingCert loads it) and the production registration.
	wo := &testEnv.WebhookInstallOptions
	opts := DefaultOptions()
	opts.Host, opts.Port, opts.CertDir = wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir
	opts.ManagerUsernames = []string{managerUser}
	srv, err := NewServer(opts)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:         scheme,
		WebhookServer:  srv,
		Metrics:        metricsserver.Options{BindAddress: "0"},
		LeaderElection: false,
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(SetupWithManager(mgr, opts)).To(Succeed())
	suiteReader = mgr.GetAPIReader()

	suiteCtx, cancelMgr = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
	DeferCleanup(func() { cancelMgr() })

	// Wait until the webhook server answers TLS with envtest's CA.
	Eventually(func() error {
		return mgr.GetWebhookServer().StartedChecker()(nil)
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

	for _, ns := range []string{managerNS, testNS, otherNS} {
		Expect(adminC.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	installRBAC()

	admin, err := testEnv.AddUser(envtest.User{Name: "kubectl-admin", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := admin.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
})

// installRBAC loads every ClusterRole in config/rbac (as written, not kustomized) and binds the
// test identities the way config/rbac's bindings and a platform team would.
func installRBAC() {
	roles, err := framework.ClusterRoles()
	Expect(err).NotTo(HaveOccurred())
	created := map[string]bool{}
	for _, role := range roles {
		Expect(adminC.Create(suiteCtx, &role)).To(Succeed(), "ClusterRole %s from config/rbac", role.Name)
		created[role.Name] = true
	}
	for _, r := range []string{"manager-role", "agentsession-agent-role", "agentsession-viewer-role",
		"agentsession-editor-role", "agentsession-reviewer-role", "planmodeconfig-viewer-role"} {
		Expect(created).To(HaveKey(r), "config/rbac must define ClusterRole %s", r)
	}
	bind := func(name, role string, subject rbacv1.Subject, ns string) {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		if ns == "" {
			Expect(adminC.Create(suiteCtx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: ref, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
			return
		}
		Expect(adminC.Create(suiteCtx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			RoleRef: ref, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
	}
	user := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	sa := func(ns, n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: n}
	}
	bind("test-manager", "manager-role", sa(managerNS, testManagerName), "")
	bind("test-agent", "agentsession-agent-role", sa(testNS, agentSAName), testNS)
	// Every service account of the namespace may reach status.agent by RBAC, as a shared agent
	// role binding would let it: the webhook's binding of one service account to one session
	// is what keeps each to its own.
	bind("test-agents", "agentsession-agent-role", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + testNS}, testNS)
	bind("test-foreign-agent", "agentsession-agent-role", sa(otherNS, foreignAgentSA), testNS)
	bind("test-viewer", "agentsession-viewer-role", user(viewerUser), testNS)
	bind("test-viewer-pmc", "planmodeconfig-viewer-role", user(viewerUser), testNS)
	bind("test-editor", "agentsession-editor-role", user(editorUser), testNS)
	bind("test-reviewer", "agentsession-reviewer-role", user(reviewerUser), testNS)
	bind("test-reviewer-edit", "agentsession-editor-role", user(reviewerUser), testNS)
	bind("test-bot", "agentsession-editor-role", user(agentGroupUser), testNS)
}

// as returns a client that impersonates user (with groups; a service account gets its groups
// from the API server).
func as(user string, groups ...string) client.Client {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	cl, err := client.New(c, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cl
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// statusOf digs the API status out of an error, failing the spec when it is not one.
func statusOf(err error) metav1.Status {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	var st apierrors.APIStatus
	Expect(err).To(BeAssignableToTypeOf(&apierrors.StatusError{}), "error: %v", err)
	st = err.(apierrors.APIStatus)
	return st.Status()
}
