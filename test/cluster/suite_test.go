//go:build cluster

// Package cluster runs the operator the way users run it, on a real single-node Kubernetes
// cluster (hack/cluster): the manager image (FROM scratch, from hack/static-build.sh) deployed from
// dist/install.yaml through test/cluster/overlay (cert-manager replaced by a serving Secret and
// caBundle the suite generates), the webhooks reached through their Service over TLS, RBAC
// exercised with real service-account tokens, the reference agent and the real harness (dsh with
// agents/dsh-plugin, on a scripted model the suite serves on the node address) as pods, leader
// election between two replicas, --metrics-secure scraped from a pod, Pod Security restricted
// enforced by namespace labels, a PostgreSQL log store on the host reached through the cluster's
// own bridge, and the SQLite store on a volume.
//
// Run it with `make test-cluster` (builds and starts the cluster, loads the images); it fails,
// naming that target, when the cluster is not up.
package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/test/framework/pgtest"
)

// The cluster's own addresses (hack/cluster/up.sh): the node address on the interface up.sh
// creates, and the bridge CNI's pod network.
const (
	defaultNodeIP = "10.250.0.1"
	podCIDR       = "10.244.0.0/24"
)

var (
	ctx        context.Context
	cancel     context.CancelFunc
	scheme     = k8sruntime.NewScheme()
	root       string
	clusterDir string
	nodeIP     string
	workDir    string
	kubeconfig string // the cluster admin's
	kubectl    string
	pluginDir  string // kubectl-plan, put on kubectl's PATH
	helmBin    string // Helm v4 (hack/helm.sh)
	restCfg    *rest.Config
	k8s        client.Client
	clientset  *kubernetes.Clientset
	images     map[string]string // MANAGER_IMAGE, REFAGENT_IMAGE, PROBE_IMAGE, DSH_AGENT_IMAGE
	pg         *pgtest.Server
)

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "cluster: the operator deployed from dist/install.yaml on a real single-node cluster")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	ctx, cancel = context.WithCancel(context.Background())
	DeferCleanup(cancel)
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(agentsv1alpha1.AddToScheme(scheme)).To(Succeed())

	var err error
	root, err = framework.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	clusterDir = envOr("CLUSTER_DIR", filepath.Join(root, ".cluster"))
	nodeIP = envOr("NODE_IP", defaultNodeIP)
	kubeconfig = filepath.Join(clusterDir, "pki", "admin.kubeconfig")
	Expect(kubeconfig).To(BeAnExistingFile(), "no test cluster in %s: run `make test-cluster` (builds, starts and loads it)", clusterDir)
	images = readEnvFile(filepath.Join(clusterDir, "images.env"))
	for _, k := range []string{"MANAGER_IMAGE", "REFAGENT_IMAGE", "PROBE_IMAGE", "DSH_AGENT_IMAGE"} {
		Expect(images).To(HaveKey(k), "%s/images.env names no %s: run `make test-cluster` (hack/cluster/images.sh loads the images)", clusterDir, k)
	}

	restCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	restCfg.QPS, restCfg.Burst = 50, 100
	k8s, err = client.New(restCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(restCfg)
	Expect(err).NotTo(HaveOccurred())
	_, err = clientset.Discovery().ServerVersion()
	Expect(err).NotTo(HaveOccurred(), "the test cluster's API server does not answer: run `make test-cluster` (or `make cluster-up`)")

	workDir, err = os.MkdirTemp("", "planmode-cluster-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, workDir)
	kubectl, err = framework.Kubectl()
	Expect(err).NotTo(HaveOccurred())

	By("building the kubectl-plan plugin")
	pluginDir = filepath.Join(workDir, "bin")
	build := exec.Command("go", "build", "-o", pluginDir+"/", "./cmd/kubectl-plan")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build: %s", out)

	By("building Helm v4 from Go modules, when bin/ has none (hack/helm.sh)")
	helmCmd := exec.Command(filepath.Join(root, "hack", "helm.sh"))
	helmCmd.Dir = root
	out, err = helmCmd.Output()
	Expect(err).NotTo(HaveOccurred(), "hack/helm.sh: %s", out)
	helmBin = strings.TrimSpace(string(out))

	By("starting PostgreSQL on the host, reachable from pods through the cluster's node address " + nodeIP)
	pg, err = pgtest.StartWith(ctx, pgtest.Options{ListenAddresses: []string{nodeIP}, PasswordCIDRs: []string{podCIDR}})
	Expect(err).NotTo(HaveOccurred(), "start PostgreSQL (run `make postgres` if its binaries are missing)")
	DeferCleanup(pg.Stop)
	_, err = pg.CreateDatabase(ctx, "planmode")
	Expect(err).NotTo(HaveOccurred())
})

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// readEnvFile reads KEY=VALUE lines.
func readEnvFile(path string) map[string]string {
	GinkgoHelper()
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred(), "run `make test-cluster` (hack/cluster/images.sh writes %s)", path)
	defer func() { _ = f.Close() }()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "="); ok {
			m[k] = v
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return m
}

// kubeWith runs kubectl with the given kubeconfig and the plugin on PATH.
func kubeWith(kc string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc, "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kube runs kubectl as the cluster admin.
func kube(args ...string) (string, error) { return kubeWith(kubeconfig, args...) }

// kubeOK runs kubectl as the cluster admin and fails the spec on an error.
func kubeOK(args ...string) string {
	GinkgoHelper()
	out, err := kube(args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

func must[T any](v T, err error) T {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return v
}

func ptr[T any](v T) *T { return &v }

func fmtDuration(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
