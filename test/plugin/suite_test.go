package plugin_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
)

// These specs run the kubectl-plan binary the way users do: built into a temporary directory
// that is put on PATH, and called as `kubectl plan ...` through the real kubectl's plugin
// mechanism (kubectl from hack/envtest-binaries.sh, the control plane's version), against a real
// kube-apiserver and etcd (envtest).

var (
	cfg        *rest.Config
	k8sClient  client.Client
	testEnv    *envtest.Environment
	ctx        context.Context
	cancel     context.CancelFunc
	kubectl    string
	pluginDir  string
	kubeconfig string
)

func TestPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl plan plugin Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	var err error
	kubectl, err = framework.Kubectl()
	Expect(err).NotTo(HaveOccurred())

	By("building kubectl-plan into a directory on PATH")
	pluginDir = GinkgoT().TempDir()
	root, err := framework.ModuleRoot()
	Expect(err).NotTo(HaveOccurred())
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "kubectl-plan"), "./cmd/kubectl-plan")
	build.Dir = root
	out, err := build.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "go build ./cmd/kubectl-plan: %s", out)

	Expect(agentsv1alpha1.AddToScheme(clientgoscheme.Scheme)).To(Succeed())
	testEnv, cfg, err = framework.Start(framework.Options{})
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: clientgoscheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = writeKubeconfig(cfg)
})

var _ = AfterSuite(func() {
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// writeKubeconfig writes a kubeconfig for the envtest control plane with the admin user.
func writeKubeconfig(c *rest.Config) string {
	GinkgoHelper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Token: c.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest", Namespace: "default"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path
}

// kplan runs `kubectl plan ARGS...` through the real kubectl, with kubectl-plan on PATH.
func kplan(args ...string) framework.CmdResult {
	GinkgoHelper()
	return kubectlRun(nil, append([]string{"plan"}, args...)...)
}

// kubectlRun runs `kubectl ARGS...` with the envtest kubeconfig, the plugin built for this run
// alone on PATH, and env added last.
func kubectlRun(env []string, args ...string) framework.CmdResult {
	GinkgoHelper()
	cmd := framework.KubectlCmd{Path: kubectl, Env: append(os.Environ(),
		// Only the plugin built for this run: another kubectl-plan on the caller's PATH (make
		// test puts bin/ there, where make build writes one) would shadow it, and kubectl
		// plugin list fails on the warning. kubectl itself runs by its absolute path.
		"PATH="+pluginDir,
		"KUBECONFIG="+kubeconfig,
		"HOME="+GinkgoT().TempDir(), // no ~/.kube cache shared between runs
	)}
	cmd.Env = append(cmd.Env, env...)
	return cmd.Run(ctx, GinkgoT(), nil, args...)
}
