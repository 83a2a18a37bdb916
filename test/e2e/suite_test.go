// Package e2e runs the product the way a user does: the real manager binary (go build
// ./cmd/manager), the real kubectl at the control plane's version with the kubectl-plan plugin
// on PATH, and the reference agent binary (cmd/refagent), against an envtest control plane, on
// both log backends (a SQLite file and a throwaway PostgreSQL server). The session logs are
// read back through pkg/sessionlog and checked with pkg/invariant.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/freeport"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

var (
	ctx        context.Context
	cancel     context.CancelFunc
	testEnv    *envtest.Environment
	k8s        client.Client
	scheme     = k8sruntime.NewScheme()
	root       string // the repository
	workDir    string
	binDir     string // manager, kubectl-plan, refagent
	kubectl    string
	kubeconfig string
	pg         *pgtest.Server
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "e2e: real manager, kubectl, kubectl-plan and reference agent on SQLite and PostgreSQL")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	ctx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(agentsv1alpha1.AddToScheme(scheme)).To(Succeed())
	var err error
	root, err = framework.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	workDir, err = os.MkdirTemp("", "planmode-e2e-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, workDir)

	By("building the manager, kubectl-plan, refagent and planlog binaries")
	binDir = filepath.Join(workDir, "bin")
	build := exec.Command("go", "build", "-o", binDir+"/", "./cmd/manager", "./cmd/kubectl-plan", "./cmd/refagent", "./cmd/planlog")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build: %s", out)

	kubectl, err = framework.Kubectl()
	Expect(err).NotTo(HaveOccurred())

	By("starting the control plane")
	var cfg *rest.Config
	testEnv, cfg, err = framework.Start(framework.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(testEnv.Stop()).To(Succeed()) })
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	admin, err := testEnv.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := admin.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(workDir, "kubeconfig")
	Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())

	By("starting a throwaway PostgreSQL server")
	pg = pgtest.MustStart(GinkgoT())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
})

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() int {
	GinkgoHelper()
	port, err := freeport.Pick()
	Expect(err).NotTo(HaveOccurred())
	return port
}

// proc is one child process (manager or agent) with its output in a file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func startProc(name string, env []string, bin string, args ...string) *proc {
	GinkgoHelper()
	p := &proc{name: name, logPath: filepath.Join(workDir, name+".log"), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), append([]string{"KUBECONFIG=" + kubeconfig}, env...)...)
	f, err := os.Create(p.logPath)
	Expect(err).NotTo(HaveOccurred())
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(p.cmd.Start()).To(Succeed(), "start %s", name)
	go func() {
		p.err = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	DeferCleanup(func() {
		p.kill()
		if CurrentSpecReport().Failed() {
			GinkgoWriter.Printf("---- %s output ----\n%s\n", p.name, p.output())
		}
	})
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// waitExit waits for the process to end and expects exit status 0.
func (p *proc) waitExit(timeout time.Duration) {
	GinkgoHelper()
	Eventually(p.exited).WithTimeout(timeout).WithPolling(50*time.Millisecond).Should(BeTrue(), "%s did not finish:\n%s", p.name, p.output())
	Expect(p.err).NotTo(HaveOccurred(), "%s failed:\n%s", p.name, p.output())
}

// manager is a running manager binary.
type manager struct {
	*proc
	metricsURL, readyURL string
}

func startManager(name, storeURL string, events bool, extra ...string) *manager {
	GinkgoHelper()
	return startManagerEnv(name, storeURL, events, nil, extra...)
}

// startManagerEnv is startManager with env added to the manager's environment (a KUBECONFIG
// of its own).
func startManagerEnv(name, storeURL string, events bool, env []string, extra ...string) *manager {
	GinkgoHelper()
	mp, hp := freePort(), freePort()
	ev := "off"
	if events {
		ev = "on"
	}
	m := &manager{
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", mp),
		readyURL:   fmt.Sprintf("http://127.0.0.1:%d/readyz", hp),
	}
	// The store URL goes in the environment: it may hold a password.
	args := append([]string{
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", mp), "--metrics-secure=false", // loopback; the secure default has its own spec
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", hp),
		"--webhook-port=-1", "--events=" + ev, "--max-store-backoff=1s",
		// The pending write of a selection made during a turn is held 1s, not 30s: the specs
		// watch the pending state while the agent waits (the hold has its specs in controllers).
		"--pending-status-delay=1s",
		"--graceful-shutdown-timeout=2s"}, extra...)
	m.proc = startProc(name, append([]string{"PLANMODE_LOG_STORE=" + storeURL}, env...), filepath.Join(binDir, "manager"), args...)
	Eventually(func() (int, error) {
		if m.exited() {
			return 0, StopTrying("the manager exited:\n" + m.output())
		}
		return httpStatus(m.readyURL)
	}).WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(Equal(http.StatusOK), "manager %s never became ready", name)
	return m
}

func httpStatus(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// metric returns the sum of the samples of name whose labels include every pair in labels
// (`k="v"`), scraped from the manager's /metrics.
func (m *manager) metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get(m.metricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line[:i], l)
		}
		if !match {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no sample of %s with %v in /metrics", name, labels)
	}
	return sum, nil
}

// kube runs the real kubectl with kubectl-plan on PATH.
func kube(args ...string) (string, error) {
	GinkgoHelper()
	return kubeAs(kubeconfig, args...)
}

// kubeAs is kube with another kubeconfig (another control plane or identity).
func kubeAs(kubeconfig string, args ...string) (string, error) {
	GinkgoHelper()
	c, stop := context.WithTimeout(ctx, 60*time.Second)
	defer stop()
	cmd := exec.CommandContext(c, kubectl, args...)
	cmd.Env = append(os.Environ(),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+kubeconfig, "HOME="+workDir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	GinkgoWriter.Printf("$ kubectl %s\n%s", strings.Join(args, " "), out.String())
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		Expect(err).NotTo(HaveOccurred(), "run kubectl")
	}
	return out.String(), err
}
