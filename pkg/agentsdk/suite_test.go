package agentsdk_test

import (
	"context"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/floor"
)

// Sessions with this label are answered by the in-test floor ("echo") acknowledger; the others
// have no manager unless a test plays it.
const ackLabel = "agentsdk-test/ack"

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8s       client.Client // the test's own client (plays user and, where said, manager)
	store     sessionlog.Store
	suiteCtx  context.Context
	suiteStop context.CancelFunc
	scheme    = runtime.NewScheme()
)

func TestAgentSDK(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "agentsdk envtest suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, suiteStop = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())

	var err error
	testEnv, cfg, err = framework.Start(framework.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	store, err = sessionlog.Open(suiteCtx, "sqlite://"+filepath.Join(GinkgoT().TempDir(), "log.db"))
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	sel := labels.SelectorFromSet(labels.Set{ackLabel: "floor"})
	Expect((&floor.Reconciler{Client: mgr.GetClient(), Store: store, Selector: sel}).SetupWithManager(mgr)).To(Succeed())
	shaped := labels.SelectorFromSet(labels.Set{ackLabel: "floor-manager-shape"})
	Expect((&floor.Reconciler{Client: mgr.GetClient(), Store: store, Selector: shaped, Name: "floor-manager-shape", ManagerShape: true}).SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if suiteStop != nil {
		suiteStop()
	}
	if store != nil {
		_ = store.Close()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// newNamespace creates a fresh namespace for one spec.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "agentsdk-"}}
	Expect(k8s.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}
