package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// recorder is a plain-HTTP reverse proxy in front of the API server for one manager process:
// it records every request the manager makes, so the test can name what it read and wrote.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
	srv  *http.Server
	addr string
}

type recorded struct {
	method, path, query string
	body                []byte
}

func startRecorder(t *testing.T, cfg *rest.Config) *recorder {
	t.Helper()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	rp.FlushInterval = -1 // watches stream
	r := &recorder{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.URL.RawQuery, body})
		r.mu.Unlock()
		rp.ServeHTTP(w, req)
	})}
	go func() { _ = r.srv.Serve(l) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func (r *recorder) snapshot() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func (r *recorder) kubeconfig(t *testing.T) string {
	t.Helper()
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: rec, cluster: {server: "http://%s"}}]
contexts: [{name: rec, context: {cluster: rec, user: rec}}]
users: [{name: rec, user: {}}]
current-context: rec
`, r.addr)
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShardsOnlyTouchTheirSessions runs two real manager processes on one envtest control
// plane, with --shard-selector planmode.harness.dev/shard=a and =b and leader election on,
// each behind a recording proxy. Sessions of shard a, shard b and unlabelled ones are toggled;
// each shard's sessions are committed, the unlabelled ones are never touched, and every
// AgentSession read and write (and every Event) of a manager concerns its own shard only.
func TestShardsOnlyTouchTheirSessions(t *testing.T) {
	g := NewWithT(t)
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := framework.Assets() // before the build: without the binaries it cannot run
	g.Expect(err).NotTo(HaveOccurred())
	root, err := framework.ModuleRoot()
	g.Expect(err).NotTo(HaveOccurred())
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = root
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go build ./cmd/manager: %s", out)

	env, cfg, err := framework.Start(framework.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = env.Stop() }()
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	storeURL := "sqlite://" + filepath.Join(t.TempDir(), "log.db")
	store, err := sessionlog.Open(ctx, storeURL)
	g.Expect(err).NotTo(HaveOccurred())
	defer store.Close()

	ns := "shards"
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &v1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: v1alpha1.PlanModeConfigSpec{Section: "Plan first."}})).To(Succeed())
	shardOf := map[string]string{}
	for _, sh := range []string{"a", "b", ""} {
		for i := range 4 {
			name := fmt.Sprintf("s%s-%d", sh, i)
			if sh == "" {
				name = fmt.Sprintf("unlabelled-%d", i)
			}
			obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.AgentSessionSpec{SessionID: name}}
			if sh != "" {
				obj.Labels = map[string]string{ShardLabel: sh}
			}
			g.Expect(k8s.Create(ctx, obj)).To(Succeed())
			shardOf[name] = sh
		}
	}

	recs := map[string]*recorder{}
	for _, sh := range []string{"a", "b"} {
		rec := startRecorder(t, cfg)
		recs[sh] = rec
		cmd := exec.Command(bin, "--log-store="+storeURL, "--shard-selector="+ShardLabel+"="+sh,
			"--leader-elect", "--leader-election-namespace=default",
			"--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-port=-1")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+rec.kubeconfig(t))
		logf, err := os.Create(filepath.Join(t.TempDir(), "manager.log"))
		g.Expect(err).NotTo(HaveOccurred())
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		g.Expect(cmd.Start()).To(Succeed())
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				t.Logf("manager shard %s log:\n%s", sh, b)
			}
		}()
	}

	get := func(name string) *v1alpha1.AgentSession {
		var s v1alpha1.AgentSession
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s)).To(Succeed())
		return &s
	}
	// Each shard takes its sessions on; nobody touches the unlabelled ones.
	g.Eventually(func(g Gomega) {
		for name, sh := range shardOf {
			if sh != "" {
				g.Expect(get(name).Status.PlanMode.Config).NotTo(BeNil(), "%s (shard %s) not taken on", name, sh)
			}
		}
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	for name := range shardOf {
		obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		g.Expect(k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"planMode":{"active":true}}}`)))).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for name, sh := range shardOf {
			if sh == "" {
				continue
			}
			s := get(name)
			g.Expect(s.Status.PlanMode.Active).To(BeTrue(), "%s (shard %s) not committed", name, sh)
			tail, err := store.Tail(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tail.Active).To(BeTrue(), "%s (shard %s): no plan/mode in the log", name, sh)
		}
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for name, sh := range shardOf {
			if sh != "" {
				continue
			}
			s := get(name)
			g.Expect(s.Status.PlanMode.Config).To(BeNil(), "%s (unlabelled) was taken on", name)
			tail, err := store.Tail(ctx, name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tail.NextSeq).To(BeZero(), "%s (unlabelled) has log events", name)
		}
	}).WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

	// Every AgentSession request and Event of a manager concerns its shard only.
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	for sh, rec := range recs {
		reqs := rec.snapshot()
		writes, events := 0, 0
		for _, r := range reqs {
			if strings.Contains(r.path, "/agentsessions") {
				if name, ok := strings.CutPrefix(r.path[strings.Index(r.path, "/agentsessions"):], "/agentsessions/"); ok {
					name = strings.SplitN(name, "/", 2)[0]
					g.Expect(shardOf[name]).To(Equal(sh), "manager of shard %s: %s %s", sh, r.method, r.path)
					if r.method != http.MethodGet {
						writes++
					}
				} else {
					// A list or watch of the collection: it must carry the shard's selector.
					q, _ := url.ParseQuery(r.query)
					g.Expect(q.Get("labelSelector")).To(Equal(ShardLabel+"="+sh), "manager of shard %s: %s %s?%s", sh, r.method, r.path, r.query)
				}
			}
			if strings.HasSuffix(r.path, "/events") && r.method == http.MethodPost {
				// events.k8s.io (regarding) or core (involvedObject, the leader-election Event
				// about the shard's Lease): an Event about an AgentSession names its shard's.
				obj, _, err := decoder.Decode(r.body, nil, nil)
				g.Expect(err).NotTo(HaveOccurred(), "%s %s: %q", r.method, r.path, r.body)
				var refs []corev1.ObjectReference
				switch ev := obj.(type) {
				case *eventsv1.Event:
					refs = append(refs, ev.Regarding)
				case *corev1.Event:
					refs = append(refs, ev.InvolvedObject)
				default:
					t.Fatalf("%s %s: not an Event: %T", r.method, r.path, obj)
				}
				for _, ref := range refs {
					if ref.Kind == "AgentSession" {
						events++
						g.Expect(shardOf[ref.Name]).To(Equal(sh), "manager of shard %s wrote an Event about %s: %s %s", sh, ref.Name, r.path, r.body)
					}
				}
			}
		}
		g.Expect(writes).To(BeNumerically(">=", 4), "manager of shard %s wrote no status", sh)
		g.Expect(events).To(BeNumerically(">=", 4), "manager of shard %s wrote no Event about its sessions", sh)
	}

	// One Lease per shard.
	var leases coordinationv1.LeaseList
	g.Expect(k8s.List(ctx, &leases, client.InNamespace("default"))).To(Succeed())
	var names []string
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "planmode-operator.agents.harness.dev-shard-") {
			names = append(names, l.Name)
		}
	}
	g.Expect(names).To(HaveLen(2), "leases: %v", names)
}
