package refagent_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/apicount"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// The suite runs the reference agent (through the agent SDK) against the real reconciler in a
// real manager, a real kube-apiserver and etcd (envtest), on both session-log backends.

var (
	testEnv  *envtest.Environment
	cfg      *rest.Config
	k8s      client.Client
	scheme   = runtime.NewScheme()
	suiteCtx context.Context
	cancel   context.CancelFunc
	pg       *pgtest.Server
	stores   = map[string]sessionlog.Store{}
)

var backendNames = []string{"sqlite", "postgres"}

func TestRefAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "reference agent + real reconciler suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	var err error
	testEnv, cfg, err = framework.Start(framework.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	stores["sqlite"], err = sessionlog.Open(suiteCtx, "sqlite://"+filepath.Join(GinkgoT().TempDir(), "log.db"))
	Expect(err).NotTo(HaveOccurred())
	pg, err = pgtest.Start(suiteCtx)
	Expect(err).NotTo(HaveOccurred(), "start a throwaway PostgreSQL: run `make postgres`")
	url, err := pg.CreateDatabase(suiteCtx, "refagent")
	Expect(err).NotTo(HaveOccurred())
	stores["postgres"], err = sessionlog.Open(suiteCtx, url)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	for _, s := range stores {
		_ = s.Close()
	}
	if pg != nil {
		Expect(pg.Stop()).To(Succeed())
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// faultStore is the real store with an append switch, to make the manager's appends fail as
// they do when the log store is down.
type faultStore struct {
	sessionlog.Store
	fail atomic.Bool
}

func (f *faultStore) Append(ctx context.Context, id string, evs []harness.Event) (harness.Tail, error) {
	if f.fail.Load() {
		return harness.Tail{}, errStoreDown
	}
	return f.Store.Append(ctx, id, evs)
}

type storeDown struct{}

func (storeDown) Error() string { return "connection refused (injected)" }

var errStoreDown error = storeDown{}

// manager is one running real manager.
type manager struct {
	api   *apicount.Counter
	store *faultStore
	stop  func()
}

// startManager runs the real reconciler (as cmd/manager wires it) with counted API requests.
func startManager(store sessionlog.Store) *manager {
	m := &manager{api: apicount.New(), store: &faultStore{Store: store}}
	mgr, err := framework.StartManager(suiteCtx, m.api.Wrap(cfg), framework.ManagerOptions{Scheme: scheme, Setup: func(mgr ctrl.Manager) error {
		r := &controllers.AgentSessionReconciler{
			Client:          mgr.GetClient(),
			Store:           m.store,
			Recorder:        mgr.GetEventRecorder(controllers.FieldManager),
			MaxStoreBackoff: 500 * time.Millisecond,
		}
		return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4})
	}})
	Expect(err).NotTo(HaveOccurred())
	m.stop = func() { Expect(mgr.Stop()).To(Succeed()) }
	DeferCleanup(m.stop)
	return m
}

// statusWrites is the number of AgentSession status writes the manager made.
func (m *manager) statusWrites() int64 {
	return m.api.WritesTo("PATCH", "agentsessions/status") + m.api.WritesTo("PUT", "agentsessions/status")
}

// waitContext is the suite's context, bounded by how long a test waits for the manager.
func waitContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(suiteCtx, wait)
}
