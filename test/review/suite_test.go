package review_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	planmetrics "github.com/harness-dev/planmode-operator/internal/metrics"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/webhooks"
)

// The whole review flow end to end: a real kube-apiserver and etcd (envtest), the production
// admission webhooks and the real AgentSession reconciler running as the manager's service
// account, agents driven through the real agent SDK as the agent's service account, a shared
// SQLite session log, and people acting through `kubectl plan` (the plugin binary on PATH, run
// by the real kubectl) under impersonation, with the roles from config/rbac.

const (
	managerNS = "planmode-system"
	ns        = "team-a"
	agentSA   = "planmode-agent"
	toggler   = "tom@example.com"  // agentsession-editor-role: toggles plan mode, cannot decide
	reviewer  = "rita@example.com" // agentsession-reviewer-role: decides plan reviews
	viewer    = "viv@example.com"  // agentsession-viewer-role
)

var (
	managerUser = webhooks.DefaultManagerUsername(managerNS)
	agentUser   = "system:serviceaccount:" + ns + ":" + agentSA

	testEnv    *envtest.Environment
	cfg        *rest.Config
	k8s        client.Client // admin
	scheme     = k8sruntime.NewScheme()
	ctx        context.Context
	cancel     context.CancelFunc
	store      sessionlog.Store
	storeURL   string
	kubectl    string
	pluginDir  string
	kubeconfig string
	repoRoot   string
	// managerLog holds everything the manager (reconciler and webhooks) logged.
	managerLog = &framework.SyncBuffer{}
	// sessionGauges are the manager's session gauges (planmode_sessions and the review gauges).
	sessionGauges *planmetrics.SessionCollector
)

func TestReview(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Plan review end-to-end Suite")
}

var _ = BeforeSuite(func() {
	// The manager's log is also kept, for the specs that read its lines (integrity_test.go).
	logf.SetLogger(zap.New(zap.WriteTo(io.MultiWriter(GinkgoWriter, managerLog)), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	DeferCleanup(func() { cancel() })
	var err error
	kubectl, err = framework.Kubectl()
	Expect(err).NotTo(HaveOccurred())
	repoRoot, err = framework.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())

	By("building kubectl-plan into a directory on PATH")
	pluginDir = GinkgoT().TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-plan"), "./cmd/kubectl-plan")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/kubectl-plan: %s", out)

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(agentsv1alpha1.AddToScheme(scheme)).To(Succeed())
	testEnv, cfg, err = framework.Start(framework.Options{Webhooks: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(testEnv.Stop()).To(Succeed()) })
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	for _, n := range []string{managerNS, ns} {
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	}
	installRBAC()

	storeURL = "sqlite://" + filepath.Join(GinkgoT().TempDir(), "log.db")
	store, err = sessionlog.Open(ctx, storeURL)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = store.Close() })

	By("starting the manager (reconciler and webhooks) as its service account")
	wo := &testEnv.WebhookInstallOptions
	opts := webhooks.DefaultOptions()
	opts.Host, opts.Port, opts.CertDir = wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir
	opts.ManagerUsernames = []string{managerUser}
	// One agent service account serves every session here: the specs are about review, and
	// agent binding, the default, has its own in webhooks/.
	opts.RequireAgentBinding = false
	srv, err := webhooks.NewServer(opts)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := framework.StartManager(ctx, impersonate(managerUser), framework.ManagerOptions{Scheme: scheme, WebhookServer: srv,
		Setup: func(mgr ctrl.Manager) error {
			if err := webhooks.SetupWithManager(mgr, opts); err != nil {
				return err
			}
			// The session gauges on the reconciler's watch, as cmd/manager makes them.
			sessionGauges = planmetrics.NewSessionCollector()
			r := &controllers.AgentSessionReconciler{Client: mgr.GetClient(), Store: store, Recorder: mgr.GetEventRecorder(controllers.FieldManager),
				SessionGauges: sessionGauges.EventHandler()}
			return r.SetupWithManager(mgr, controller.Options{})
		}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })

	admin, err := testEnv.AddUser(envtest.User{Name: "kubectl-admin", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := admin.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())

	Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: agentsv1alpha1.PlanModeConfigSpec{Section: planSection}})).To(Succeed())

	By("waiting for the reconciler to run (its caches synced), so no spec races its first reconcile")
	probe := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: agentsv1alpha1.AgentSessionSpec{SessionID: "probe"}}
	Expect(k8s.Create(ctx, probe)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(probe), probe)).To(Succeed())
		g.Expect(probe.Status.ObservedGeneration).To(Equal(probe.Generation))
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	Expect(k8s.Delete(ctx, probe)).To(Succeed())
})

const planSection = "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."

// installRBAC loads the ClusterRoles of config/rbac as written and binds the test identities.
func installRBAC() {
	roles, err := framework.ClusterRoles()
	Expect(err).NotTo(HaveOccurred())
	for _, role := range roles {
		Expect(k8s.Create(ctx, &role)).To(Succeed(), "ClusterRole %s from config/rbac", role.Name)
	}
	bind := func(name, role string, subject rbacv1.Subject, namespace string) {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		if namespace == "" {
			Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
			return
		}
		Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, RoleRef: ref, Subjects: []rbacv1.Subject{subject}})).To(Succeed())
	}
	user := func(n string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: n}
	}
	bind("manager", "manager-role", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: managerNS, Name: "planmode-controller-manager"}, "")
	bind("agent", "agentsession-agent-role", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: agentSA}, ns)
	bind("toggler", "agentsession-editor-role", user(toggler), ns)
	bind("reviewer", "agentsession-reviewer-role", user(reviewer), ns)
	bind("viewer", "agentsession-viewer-role", user(viewer), ns)
	bind("viewer-pmc", "planmodeconfig-viewer-role", user(viewer), ns)
}

func impersonate(user string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	return c
}

// kplan runs `kubectl plan ARGS... -n team-a --as USER` through the real kubectl.
func kplan(user string, args ...string) framework.CmdResult {
	GinkgoHelper()
	return run(user, append([]string{"plan"}, args...)...)
}

// run runs `kubectl ARGS... -n team-a --as USER`.
func run(user string, args ...string) framework.CmdResult {
	GinkgoHelper()
	return runKubectl(append(args, "-n", ns, "--as", user)...)
}

// runKubectl runs `kubectl ARGS...` as given, with the suite's kubeconfig (an admin, who may
// impersonate) and kubectl-plan on PATH.
func runKubectl(args ...string) framework.CmdResult {
	GinkgoHelper()
	return runKubectlWith(kubeconfig, args...)
}

// runKubectlWith runs `kubectl ARGS...` with the credentials of kubeconfig kc.
func runKubectlWith(kc string, args ...string) framework.CmdResult {
	GinkgoHelper()
	return framework.KubectlCmd{Path: kubectl, Env: append(os.Environ(),
		"PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+kc,
		"HOME="+GinkgoT().TempDir(),
	)}.Run(ctx, GinkgoT(), nil, args...)
}
