// Package framework is the test support every envtest suite and benchmark shares: one builder of
// the envtest control plane (the module's CRDs, the webhook configurations where a suite serves
// them, one error naming the fix when the control-plane binaries are not set up), and the paths
// suites need from the module, a buffer for a child process's output, the real harness's name for
// a project's session directory, the kubectl runner the kubectl plan suites assert on (KubectlCmd,
// CmdResult), the agent they drive sessions with step by step (StepAgent) and config/rbac's
// ClusterRoles as written (ClusterRoles). Its subpackages hold a throwaway PostgreSQL server
// (pgtest), an API-request counter (apicount) and the benchmark's floor controller (floor). It
// also reads a process's state and CPU time, and finds the envtest API server's process.
//
// It is test-support code: no production binary imports it.
package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/mod/modfile"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// modulePath is the module whose root ModuleRoot finds.
const modulePath = "github.com/harness-dev/planmode-operator"

// AssetsEnv names the directory holding kube-apiserver, etcd and kubectl.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// ErrNoAssets is returned when AssetsEnv is unset. `make test`, `make bench` and
// `make bench-scale` build the binaries and set it; a single `go test` needs it set by hand.
var ErrNoAssets = errors.New(AssetsEnv + " is not set: run `make envtest-assets` (it builds kube-apiserver, etcd and kubectl " +
	"into bin/k8s/<version>-<os>-<arch>) and set " + AssetsEnv + " to that directory, or run the suite through `make test`, " +
	"which does both")

// Options says what a suite's control plane holds besides the core APIs.
type Options struct {
	// NoCRDs leaves the module's CRDs out, for suites that use only core APIs.
	NoCRDs bool
	// Webhooks installs config/webhook's admission configurations, pointed at a local serving
	// host, port and certificate (Environment.WebhookInstallOptions) where the suite starts
	// the webhook server.
	Webhooks bool
}

// Assets returns the directory of the control-plane binaries, or ErrNoAssets.
func Assets() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", ErrNoAssets
	}
	return dir, nil
}

// Kubectl returns the kubectl built next to kube-apiserver (the control plane's version).
func Kubectl() (string, error) {
	dir, err := Assets()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no kubectl in %s=%s: run `make envtest-assets`, which builds it next to kube-apiserver: %w", AssetsEnv, dir, err)
	}
	return p, nil
}

// NewEnvironment returns the envtest environment of opts, not started: the module's CRDs from
// config/crd/bases (a missing directory is an error) and, with opts.Webhooks, the admission
// configurations from config/webhook. The caller may adjust it before Start.
func NewEnvironment(opts Options) (*envtest.Environment, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if !opts.NoCRDs {
		env.CRDDirectoryPaths = []string{filepath.Join(root, "config", "crd", "bases")}
		env.ErrorIfCRDPathMissing = true
	}
	if opts.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(root, "config", "webhook")}}
	}
	return env, nil
}

// Start builds the environment of opts and starts it. On error nothing is left running.
func Start(opts Options) (*envtest.Environment, *rest.Config, error) {
	env, err := NewEnvironment(opts)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, nil, fmt.Errorf("start envtest with the binaries in %s: %w", env.BinaryAssetsDirectory, err)
	}
	return env, cfg, nil
}

// ModuleRoot returns the directory of the module's go.mod: found from the working directory
// upwards (go test runs in the package's directory, go run where it was called), else from
// this file's directory when the binary was built from a checkout.
func ModuleRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		if root, ok := findModule(dir); ok {
			return root, nil
		}
	}
	return "", fmt.Errorf("no go.mod of %s above %s: run from inside the module", modulePath, strings.Join(starts, " or "))
}

func findModule(dir string) (string, bool) {
	for {
		if modulePathOf(filepath.Join(dir, "go.mod")) == modulePath {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// modulePathOf is the module path a go.mod declares, or "" when it cannot be read.
func modulePathOf(gomod string) string {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	return modfile.ModulePath(data)
}
