package reliability

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/harness-dev/planmode-operator/internal/freeport"
)

// admissionGateway stands in for the webhook Service in front of the manager replicas: the
// API server calls it (envtest installs config/webhook pointed at it), and it forwards each
// connection to a manager whose /readyz answers 200, as a Service routes only to Ready pods.
// With no ready manager it refuses the connection, and failurePolicy Fail refuses the write:
// what a cluster does when readiness takes every replica out of the Service.
type admissionGateway struct {
	ln       net.Listener
	mu       sync.Mutex
	backends map[*managerProc]*backendState
	excluded map[*managerProc]bool // taken out of the Service by the test
	// open are the connections forwarded to each webhook address: excluding a manager closes
	// those, so the API server's kept-alive connections reach the others from then on.
	open    map[string]map[net.Conn]bool
	refused atomic.Int64 // connections refused for want of a ready manager
	stop    chan struct{}
}

type backendState struct {
	webhookAddr, probeURL string
	ready                 bool
}

// readinessPoll is how often the gateway asks each manager's /readyz (a kubelet probes every
// 10s by default; faster here, so routing follows readiness within the test's bounds).
const readinessPoll = 200 * time.Millisecond

func startAdmissionGateway(addr string) *admissionGateway {
	GinkgoHelper()
	ln, err := net.Listen("tcp", addr)
	Expect(err).NotTo(HaveOccurred(), "listen on the webhook address envtest installed")
	g := &admissionGateway{ln: ln, backends: map[*managerProc]*backendState{}, excluded: map[*managerProc]bool{},
		open: map[string]map[net.Conn]bool{}, stop: make(chan struct{})}
	go g.serve()
	go g.probe()
	return g
}

func (g *admissionGateway) close() {
	close(g.stop)
	_ = g.ln.Close()
}

// add routes to m once its /readyz answers; remove stops routing to it.
func (g *admissionGateway) add(m *managerProc, webhookPort, probePort int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.backends[m] = &backendState{
		webhookAddr: fmt.Sprintf("127.0.0.1:%d", webhookPort),
		probeURL:    fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort),
	}
}

func (g *admissionGateway) remove(m *managerProc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.backends, m)
	delete(g.excluded, m)
}

// exclude takes m out of the Service while the test needs admission served by others only,
// closing the connections forwarded to it.
func (g *admissionGateway) exclude(m *managerProc, out bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.excluded[m] = out
	if b := g.backends[m]; out && b != nil {
		for c := range g.open[b.webhookAddr] {
			_ = c.Close()
		}
	}
}

// track records c as forwarded to addr until untrack.
func (g *admissionGateway) track(addr string, c net.Conn, on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[addr] == nil {
		g.open[addr] = map[net.Conn]bool{}
	}
	if on {
		g.open[addr][c] = true
	} else {
		delete(g.open[addr], c)
	}
}

// managers are the managers the gateway knows.
func (g *admissionGateway) managers() []*managerProc {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*managerProc, 0, len(g.backends))
	for m := range g.backends {
		out = append(out, m)
	}
	return out
}

// readyManagers is how many managers the gateway routes to now.
func (g *admissionGateway) readyManagers() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for m, b := range g.backends {
		if b.ready && !g.excluded[m] {
			n++
		}
	}
	return n
}

func (g *admissionGateway) probe() {
	hc := &http.Client{Timeout: time.Second}
	t := time.NewTicker(readinessPoll)
	defer t.Stop()
	for {
		g.mu.Lock()
		probes := map[*managerProc]string{}
		for m, b := range g.backends {
			probes[m] = b.probeURL
		}
		g.mu.Unlock()
		for m, url := range probes {
			ready := false
			if resp, err := hc.Get(url); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
			g.mu.Lock()
			if b := g.backends[m]; b != nil {
				b.ready = ready
			}
			g.mu.Unlock()
		}
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
	}
}

func (g *admissionGateway) pick() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var addrs []string
	for m, b := range g.backends {
		if b.ready && !g.excluded[m] {
			addrs = append(addrs, b.webhookAddr)
		}
	}
	if len(addrs) == 0 {
		return ""
	}
	return addrs[time.Now().UnixNano()%int64(len(addrs))]
}

func (g *admissionGateway) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			addr := g.pick()
			if addr == "" {
				g.refused.Add(1)
				_ = c.Close()
				return
			}
			b, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				g.refused.Add(1)
				_ = c.Close()
				return
			}
			g.track(addr, c, true)
			defer g.track(addr, c, false)
			go func() { _, _ = io.Copy(b, c); _ = b.Close() }()
			_, _ = io.Copy(c, b)
			_ = c.Close()
		}()
	}
}

// freePort returns a TCP port free on 127.0.0.1 now.
func freePort() int {
	GinkgoHelper()
	port, err := freeport.Pick()
	Expect(err).NotTo(HaveOccurred())
	return port
}
