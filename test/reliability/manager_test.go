package reliability

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// managerOpts configure one manager process.
type managerOpts struct {
	store       string // PLANMODE_LOG_STORE (never on the command line: it may hold a password)
	kubeconfig  string // default: the suite's admin kubeconfig
	leaderElect bool
	leaseID     string
	crashPoint  string // PLANMODE_CRASH_POINT
	crashSkip   int
	webhookPort int // 0: serve the webhooks behind the suite's admission gateway; -1: off
	certDir     string
	extra       []string
}

// managerProc is one running manager binary.
type managerProc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	exitErr error
	started time.Time
}

var managerSeq atomic.Int64

func startManager(o managerOpts) *managerProc {
	GinkgoHelper()
	n := managerSeq.Add(1)
	p := &managerProc{name: fmt.Sprintf("manager-%d", n), logPath: filepath.Join(workDir, fmt.Sprintf("manager-%d.log", n)), done: make(chan struct{})}
	kc := o.kubeconfig
	if kc == "" {
		kc = kubeconfig
	}
	args := []string{
		"--metrics-bind-address=0",
		"--max-store-backoff=1s", "--max-concurrent-reconciles=4",
		"--graceful-shutdown-timeout=2s",
	}
	// Behind the gateway: the webhooks on a port of its own, the certificate envtest made for
	// the address it installed, and /readyz for the gateway's routing.
	behindGateway := o.webhookPort == 0 && gateway != nil
	var probePort int
	if behindGateway {
		wo := &testEnv.WebhookInstallOptions
		o.webhookPort, o.certDir, probePort = freePort(), wo.LocalServingCertDir, freePort()
		args = append(args, "--webhook-host=127.0.0.1", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort))
		for _, u := range managerUsernames {
			args = append(args, "--webhook-manager-username="+u)
		}
	} else {
		args = append(args, "--health-probe-bind-address=0")
	}
	if o.webhookPort == 0 {
		o.webhookPort = -1
	}
	args = append(args, fmt.Sprintf("--webhook-port=%d", o.webhookPort))
	if o.certDir != "" {
		args = append(args, "--webhook-cert-dir="+o.certDir)
	}
	if o.leaderElect {
		args = append(args, "--leader-elect", "--leader-election-namespace=default", "--leader-election-id="+o.leaseID)
	}
	args = append(args, o.extra...)
	p.cmd = exec.Command(managerBin, args...)
	p.cmd.Env = append(os.Environ(), "PLANMODE_LOG_STORE="+o.store, "KUBECONFIG="+kc)
	if o.crashPoint != "" {
		p.cmd.Env = append(p.cmd.Env, "PLANMODE_CRASH_POINT="+o.crashPoint, fmt.Sprintf("PLANMODE_CRASH_SKIP=%d", o.crashSkip))
	}
	logf, err := os.Create(p.logPath)
	Expect(err).NotTo(HaveOccurred())
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Expect(p.cmd.Start()).To(Succeed())
	p.started = time.Now()
	go func() {
		p.exitErr = p.cmd.Wait()
		_ = logf.Close()
		if behindGateway {
			gateway.remove(p)
		}
		close(p.done)
	}()
	if behindGateway {
		gateway.add(p, o.webhookPort, probePort)
	}
	DeferCleanup(p.kill)
	return p
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *managerProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *managerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *managerProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// crashedAtPoint reports whether the process killed itself at its crash point.
func (p *managerProc) crashedAtPoint() bool {
	return p.exited() && strings.Contains(p.log(), "faultinject: SIGKILL at")
}

// leads: the controllers start their workers only once this manager holds the lease.
func (p *managerProc) leads() bool {
	return strings.Contains(p.log(), "Starting workers")
}

// proxy is a TCP proxy in front of the API server: cutting it makes the API server
// unreachable for every client that goes through it (connections reset, new ones refused),
// which is what the manager and the agents see when the API server is down.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]struct{}
}

func startProxy(target string) *proxy {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.serve()
	DeferCleanup(func() { _ = ln.Close(); p.cut() })
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// kubeconfigVia rewrites the admin kubeconfig to reach the API server through addr.
func kubeconfigVia(addr string) string {
	GinkgoHelper()
	b, err := os.ReadFile(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	host := strings.TrimPrefix(cfg.Host, "https://")
	host = strings.TrimSuffix(host, "/")
	Expect(bytes.Contains(b, []byte(host))).To(BeTrue(), "kubeconfig does not name %s", host)
	path := filepath.Join(workDir, fmt.Sprintf("kubeconfig-via-%d", managerSeq.Add(1)))
	Expect(os.WriteFile(path, bytes.ReplaceAll(b, []byte(host), []byte(addr)), 0o600)).To(Succeed())
	return path
}
