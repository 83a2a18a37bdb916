package webreview_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/webhooks"
)

// kubectl plan review --web and kubectl plan inbox --web in a real headless Chromium (Debian's
// chromium, driven by chromedp): a real kube-apiserver and etcd (envtest), the production
// webhooks and reconciler as the manager's service account, agents through the real agent SDK,
// and people with their own client certificates (envtest users) running the real kubectl and
// the plugin binary, with the roles of config/rbac.
//
// WEBREVIEW_SCREENSHOTS=DIR also writes the screenshots docs/review.md shows into DIR.

const (
	managerNS = "planmode-system"
	ns        = "team-w" // no ReviewPolicy: one approval
	nsPolicy  = "team-p" // a ReviewPolicy of two approvers
	agentSA   = "planmode-agent"
)

var (
	managerUser = webhooks.DefaultManagerUsername(managerNS)

	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8s       client.Client // admin
	scheme    = k8sruntime.NewScheme()
	ctx       context.Context
	store     sessionlog.Store
	storeURL  string
	kubectl   string
	pluginDir string
	repoRoot  string
	// browser is the headless Chromium; each spec opens its tabs in it.
	browser context.Context

	rita, sam, tom *person
)

func TestWebReview(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl plan --web in headless Chromium Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	DeferCleanup(func() { cancel() })
	var err error
	kubectl, err = framework.Kubectl()
	Expect(err).NotTo(HaveOccurred())
	repoRoot, err = framework.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	chromium, err := exec.LookPath("chromium")
	Expect(err).NotTo(HaveOccurred(), "this suite needs Debian's chromium package: make chromium installs it")

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
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}})).To(Succeed())
	installRoles()
	for _, n := range []string{ns, nsPolicy} {
		setUpNamespace(n)
	}
	rita, sam, tom = newPerson("rita@example.com"), newPerson("sam@example.com"), newPerson("tom@example.com")

	storeURL = "sqlite://" + filepath.Join(GinkgoT().TempDir(), "log.db")
	store, err = sessionlog.Open(ctx, storeURL)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = store.Close() })

	By("starting the manager (reconciler and webhooks) as its service account")
	wo := &testEnv.WebhookInstallOptions
	opts := webhooks.DefaultOptions()
	opts.Host, opts.Port, opts.CertDir = wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir
	opts.ManagerUsernames = []string{managerUser}
	// One agent service account per namespace serves its sessions: agent binding has its own
	// tests in webhooks/.
	opts.RequireAgentBinding = false
	srv, err := webhooks.NewServer(opts)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := framework.StartManager(ctx, impersonate(managerUser), framework.ManagerOptions{Scheme: scheme, WebhookServer: srv,
		Setup: func(mgr ctrl.Manager) error {
			if err := webhooks.SetupWithManager(mgr, opts); err != nil {
				return err
			}
			r := &controllers.AgentSessionReconciler{Client: mgr.GetClient(), Store: store, Recorder: mgr.GetEventRecorder(controllers.FieldManager)}
			return r.SetupWithManager(mgr, controller.Options{})
		}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(mgr.Stop()).To(Succeed()) })

	// Admitted by the webhooks, so created once the manager serves them.
	for _, n := range []string{ns, nsPolicy} {
		Expect(k8s.Create(ctx, &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "default"},
			Spec: agentsv1alpha1.PlanModeConfigSpec{Section: planSection}})).To(Succeed())
	}
	Expect(k8s.Create(ctx, &agentsv1alpha1.ReviewPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsPolicy, Name: "default"},
		Spec: agentsv1alpha1.ReviewPolicySpec{Approvals: 2}})).To(Succeed())

	By("starting headless Chromium")
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // root in CI containers; the pages are our own
		chromedp.WindowSize(1100, 900),
		chromedp.Flag("disable-gpu", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, allocOpts...)
	DeferCleanup(cancelAlloc)
	var cancelBrowser context.CancelFunc
	browser, cancelBrowser = chromedp.NewContext(alloc)
	DeferCleanup(cancelBrowser)
	Expect(chromedp.Do(browser)).To(Succeed(), "start %s", chromium)

	By("waiting for the reconciler to run (its caches synced)")
	probe := &agentsv1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: agentsv1alpha1.AgentSessionSpec{SessionID: "probe"}}
	Expect(k8s.Create(ctx, probe)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(probe), probe)).To(Succeed())
		g.Expect(probe.Status.ObservedGeneration).To(Equal(probe.Generation))
	}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	Expect(k8s.Delete(ctx, probe)).To(Succeed())
})

const planSection = "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."

// installRoles loads the ClusterRoles of config/rbac as written and binds the manager.
func installRoles() {
	roles, err := framework.ClusterRoles()
	Expect(err).NotTo(HaveOccurred())
	for _, role := range roles {
		Expect(k8s.Create(ctx, &role)).To(Succeed(), "ClusterRole %s from config/rbac", role.Name)
	}
	Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "manager"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "manager-role"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: managerNS, Name: "planmode-controller-manager"}}})).To(Succeed())
}

// setUpNamespace creates namespace n and binds the agent, the
// reviewers rita and sam, and tom, who toggles plan mode but may not decide reviews.
func setUpNamespace(n string) {
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	bind := func(name, role string, subject rbacv1.Subject) {
		Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{subject}})).To(Succeed())
	}
	user := func(u string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u}
	}
	bind("agent", "agentsession-agent-role", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: n, Name: agentSA})
	bind("rita", "agentsession-reviewer-role", user("rita@example.com"))
	bind("sam", "agentsession-reviewer-role", user("sam@example.com"))
	bind("tom", "agentsession-editor-role", user("tom@example.com"))
}

func impersonate(user string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	return c
}
