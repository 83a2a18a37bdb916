package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// The suite runs the real reconciler in real managers against a real kube-apiserver and etcd
// (envtest), once per session-log backend: SQLite in a temporary directory and a throwaway
// PostgreSQL server. The agent side is driven directly through the Store and status.agent
// patches, as docs/protocol.md describes it.

var (
	cfg       *rest.Config
	k8sClient client.Client
	testEnv   *envtest.Environment
	scheme    = runtime.NewScheme()
	suiteCtx  context.Context
	cancel    context.CancelFunc
	pgServer  *pgtest.Server
	backends  map[string]*backend
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "AgentSession controller suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, cancel = context.WithCancel(context.Background())

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(agentsv1alpha1.AddToScheme(scheme)).To(Succeed())
	var err error
	testEnv, cfg, err = framework.Start(framework.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	pgServer, err = pgtest.Start(suiteCtx)
	Expect(err).NotTo(HaveOccurred(), "start a throwaway PostgreSQL: run `make postgres`")
	backends = map[string]*backend{"sqlite": openBackend("sqlite"), "postgres": openBackend("postgres")}
})

var _ = AfterSuite(func() {
	cancel()
	if pgServer != nil {
		Expect(pgServer.Stop()).To(Succeed())
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
