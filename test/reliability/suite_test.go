// Package reliability runs the real manager binary (built with -tags faultinject) against
// envtest and a throwaway PostgreSQL, with reference agents running turns and a driver toggling
// selections, and injects faults: SIGKILL at random moments and at named crash points, a
// PostgreSQL outage, the API server unreachable, a leader killed mid-workload, concurrent
// patchers. After every run pkg/invariant must find nothing.
//
// `make test` runs the short version; `make soak` sets RELIABILITY_SOAK=1 (1,000 crash
// injections, 30 s outages, 1,000 toggles per patcher). RELIABILITY_REPORT=<file> appends one
// JSON line per fault run (the figures in docs/reliability.md).
package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
	"github.com/harness-dev/planmode-operator/webhooks"
)

var (
	testEnv      *envtest.Environment
	cfg          *rest.Config // cluster admin, straight to the API server
	k8s          client.Client
	scheme       = k8sruntime.NewScheme()
	suiteCtx     context.Context
	cancel       context.CancelFunc
	pg           *pgServer
	managerBin   string
	plancheckBin string
	kubeconfig   string // cluster admin kubeconfig for the manager processes
	// agentCfg and agentKubeconfig are how the agents reach the API server: as an agent
	// identity (the agent group), which the status webhook requires of status.agent writes.
	agentCfg        *rest.Config
	agentKubeconfig string
	workDir         string
	refagentBin     string
	// gateway plays the webhook Service; admissionManager is the suite's standing replica.
	gateway          *admissionGateway
	admissionManager *managerProc
	// managerUsernames may write the manager's part of the status (the suite's managers run
	// as one of them).
	managerUsernames = []string{"reliability-manager", "planmode-manager-under-test"}
	soak             = os.Getenv("RELIABILITY_SOAK") != ""
)

// sizes of the runs: short (make test) and soak (make soak); each can be overridden by env.
var sizes = struct {
	crashes, toggles, outage, agentKills int
}{
	crashes:    envInt("RELIABILITY_CRASHES", pick(12, 1000)),
	toggles:    envInt("RELIABILITY_TOGGLES", pick(20, 1000)),
	outage:     envInt("RELIABILITY_OUTAGE_SECONDS", pick(4, 30)),
	agentKills: envInt("RELIABILITY_AGENT_KILLS", pick(12, 200)),
}

func pick(short, long int) int {
	if soak {
		return long
	}
	return short
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestReliability(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "reliability: fault runs against the real manager binary")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	suiteCtx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	var err error
	workDir, err = os.MkdirTemp("", "reliability-")
	Expect(err).NotTo(HaveOccurred())

	// The manager under test, with the crash points compiled in.
	root, err := framework.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	managerBin = filepath.Join(workDir, "manager")
	build := exec.Command("go", "build", "-tags", "faultinject", "-o", managerBin, "./cmd/manager")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build -tags faultinject ./cmd/manager:\n%s", out)
	refagentBin = filepath.Join(workDir, "refagent")
	build = exec.Command("go", "build", "-o", refagentBin, "./cmd/refagent")
	build.Dir = root
	out, err = build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/refagent:\n%s", out)
	plancheckBin = filepath.Join(workDir, "plancheck")
	build = exec.Command("go", "build", "-o", plancheckBin, "./cmd/plancheck")
	build.Dir = root
	out, err = build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/plancheck:\n%s", out)

	// The admission webhooks are installed (config/webhook), pointed at the gateway that plays
	// the webhook Service in front of the managers under test (admission_test.go).
	testEnv, cfg, err = framework.Start(framework.Options{Webhooks: true})
	Expect(err).NotTo(HaveOccurred())
	wo := &testEnv.WebhookInstallOptions
	gateway = startAdmissionGateway(fmt.Sprintf("%s:%d", wo.LocalServingHost, wo.LocalServingPort))
	cfg.QPS, cfg.Burst = 200, 400
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	admin, err := testEnv.AddUser(envtest.User{Name: "reliability-manager", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := admin.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(workDir, "kubeconfig")
	Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())
	agent, err := testEnv.AddUser(envtest.User{Name: "reliability-agent", Groups: []string{"system:masters", webhooks.DefaultAgentGroup}}, nil)
	Expect(err).NotTo(HaveOccurred())
	agentCfg = agent.Config()
	agentCfg.QPS, agentCfg.Burst = cfg.QPS, cfg.Burst
	akc, err := agent.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	agentKubeconfig = filepath.Join(workDir, "kubeconfig-agent")
	Expect(os.WriteFile(agentKubeconfig, akc, 0o600)).To(Succeed())

	pg, err = startPG(suiteCtx)
	Expect(err).NotTo(HaveOccurred(), "start a throwaway PostgreSQL: run `make postgres`")

	// One manager serves admission for the whole suite, as a standing replica would, while
	// the specs start, kill and fault their own: it reconciles no session (its shard selects
	// none) and keeps its own SQLite log, so no spec's store fault reaches it. A spec about
	// admission takes it out of the gateway.
	admissionManager = startManager(managerOpts{store: "sqlite://" + filepath.Join(workDir, "admission.db"),
		extra: []string{"--shard-selector=reliability.harness.dev/none=none"}})
	eventually(time.Minute, func(g Gomega) {
		g.Expect(admissionManager.exited()).To(BeFalse(), "the admission manager exited:\n%s", admissionManager.log())
		g.Expect(gateway.readyManagers()).To(Equal(1))
	})
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if admissionManager != nil {
		admissionManager.kill() // before the API server stops: its watches would hold it up
	}
	if gateway != nil {
		gateway.close()
	}
	if pg != nil {
		Expect(pg.Close()).To(Succeed())
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	if workDir != "" && os.Getenv("RELIABILITY_KEEP") == "" {
		_ = os.RemoveAll(workDir)
	} else if workDir != "" {
		GinkgoWriter.Printf("kept manager logs and kubeconfigs in %s\n", workDir)
	}
})

// eventually is Eventually with the suite's context and a timeout.
func eventually(timeout time.Duration, f func(g Gomega)) {
	GinkgoHelper()
	Eventually(suiteCtx, f).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
}

var _ = pgtest.StartTimeout // the server comes from pgtest (pg.go)
