package kubectlplan_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// kubectl plan as a new user meets it: make run's environment (the localenv binary, with its
// local control plane, webhooks, the real manager binary and the SQLite log, no demo agent), the
// commands typed with the PATH and KUBECONFIG its banner prints, through the real kubectl, and
// an agent driven through the real agent SDK as the demo agent's identity. Replies are checked
// against the session log they describe.

var (
	ctx    context.Context
	cancel context.CancelFunc
	repo   string
	// stateDir is make run's state folder; storeURL its session log.
	stateDir, storeURL string
	// bannerEnv is the KUBECONFIG and PATH the banner tells a user to export; only they are on
	// PATH (a kubectl elsewhere on the machine must not stand in for the one the banner names).
	bannerEnv []string
	k8s       client.Client // as the developer (make run's kubeconfig)
	agentCfg  *rest.Config  // as the demo agent
	store     sessionlog.Store
	localenv  *exec.Cmd
	envDone   chan error
	envOut    framework.SyncBuffer
)

func TestKubectlPlan(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl plan in make run's environment Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	repo, err = framework.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	assets, err := framework.Assets()
	Expect(err).NotTo(HaveOccurred())

	By("building the binaries make build builds")
	bin := GinkgoT().TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/manager", "./cmd/refagent", "./cmd/kubectl-plan", "./cmd/kubectl_complete-plan", "./cmd/localenv")
	build.Dir = repo
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build: %s", out)

	By("starting make run's environment without its demo agent")
	stateDir = GinkgoT().TempDir()
	localenv = exec.Command(filepath.Join(bin, "localenv"), "--dir", stateDir, "--assets", assets, "--bin", bin, "--no-agent",
		"--crd-dir", filepath.Join(repo, "config/crd/bases"), "--webhook-dir", filepath.Join(repo, "config/webhook"), "--ready-timeout", "3m",
		// One agent identity (make run's demo agent's) drives every session of this suite, so
		// the manager runs with binding off, as an explicit choice (docs/admission.md). Its
		// pending write of a selection made during a turn is held 1s, not 30s: the specs read
		// the pending state through kubectl while the agent waits.
		"--manager-args", "--webhook-require-agent-binding=false --pending-status-delay=1s")
	localenv.Env = append(os.Environ(), "KUBECONFIG=", "PLANMODE_LOG_STORE=")
	localenv.Stdout, localenv.Stderr = &envOut, &envOut
	Expect(localenv.Start()).To(Succeed())
	envDone = make(chan error, 1)
	go func() { envDone <- localenv.Wait() }()
	Eventually(envOut.String).WithTimeout(4*time.Minute).WithPolling(100*time.Millisecond).Should(ContainSubstring("Ctrl-C stops everything."),
		func() string { return envOut.String() })

	By("taking KUBECONFIG and PATH from the banner's export line")
	m := regexp.MustCompile(`(?m)^  export KUBECONFIG=(\S+) PATH=(\S+):\$PATH$`).FindStringSubmatch(envOut.String())
	Expect(m).NotTo(BeNil(), "the banner has an export line:\n%s", envOut.String())
	bannerEnv = []string{"KUBECONFIG=" + m[1], "PATH=" + m[2], "HOME=" + GinkgoT().TempDir(), "PLANMODE_LOG_STORE="}
	storeURL = "sqlite://" + filepath.Join(stateDir, "sessions.db")

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(agentsv1alpha1.AddToScheme(scheme)).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", m[1])
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	agentCfg, err = clientcmd.BuildConfigFromFlags("", filepath.Join(stateDir, "agent.kubeconfig"))
	Expect(err).NotTo(HaveOccurred())
	store, err = sessionlog.Open(ctx, storeURL)
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if store != nil {
		_ = store.Close()
	}
	if localenv != nil && localenv.Process != nil {
		_ = localenv.Process.Signal(os.Interrupt)
		Eventually(envDone).WithTimeout(time.Minute).Should(Receive(BeNil()), "make run stops cleanly on Ctrl-C")
	}
	if cancel != nil {
		cancel()
	}
})

// kubectl runs kubectl ARGS... with the banner's KUBECONFIG and PATH, stdin from in.
func kubectl(in io.Reader, args ...string) framework.CmdResult {
	GinkgoHelper()
	path, err := lookPath("kubectl")
	Expect(err).NotTo(HaveOccurred(), "the banner's PATH has kubectl")
	return framework.KubectlCmd{Path: path, Env: bannerEnv}.Run(ctx, GinkgoT(), in, args...)
}

// kplan runs kubectl plan ARGS....
func kplan(args ...string) framework.CmdResult {
	GinkgoHelper()
	return kubectl(nil, append([]string{"plan"}, args...)...)
}

// lookPath finds a command on the banner's PATH only.
func lookPath(name string) (string, error) {
	for _, kv := range bannerEnv {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(p) {
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode()&0o111 != 0 {
					return filepath.Join(dir, name), nil
				}
			}
		}
	}
	return "", exec.ErrNotFound
}

// background is a command left running (log -f, list -w), stopped with Ctrl-C.
type background struct {
	cmd  *exec.Cmd
	out  *framework.SyncBuffer
	done chan error
}

func startKubectl(args ...string) *background {
	GinkgoHelper()
	path, err := lookPath("kubectl")
	Expect(err).NotTo(HaveOccurred())
	b := &background{cmd: exec.Command(path, args...), out: &framework.SyncBuffer{}, done: make(chan error, 1)}
	b.cmd.Env = bannerEnv
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	Expect(b.cmd.Start()).To(Succeed())
	go func() { b.done <- b.cmd.Wait() }()
	DeferCleanup(func() {
		if b.cmd.ProcessState == nil {
			_ = b.cmd.Process.Kill()
			if err := <-b.done; err != nil {
				GinkgoWriter.Printf("kubectl %v killed at cleanup: %v\n", args, err)
			}
		}
	})
	return b
}

// interrupt sends Ctrl-C and expects a clean exit.
func (b *background) interrupt() {
	GinkgoHelper()
	Expect(b.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
	Eventually(b.done).WithTimeout(20*time.Second).Should(Receive(BeNil()), "Ctrl-C ends it cleanly:\n%s", b.out.String())
}
