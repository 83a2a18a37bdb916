package framework

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModuleRootHoldsTheCRDs(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if modulePathOf(filepath.Join(root, "go.mod")) != modulePath {
		t.Fatalf("ModuleRoot() = %s, whose go.mod is not %s", root, modulePath)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Fatalf("config/crd/bases under %s: %v", root, err)
	}
}

// Another module's go.mod on the way up (a vendored or nested module) is passed over.
func TestModuleRootSkipsOtherModules(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/other\n\ngo 1.26\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := findModule(dir); ok {
		t.Fatalf("findModule(%s) accepted example.com/other", dir)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+modulePath+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, ok := findModule(sub); !ok || got != dir {
		t.Fatalf("findModule(%s) = %q, %v; want %s", sub, got, ok, dir)
	}
}

func TestUnsetAssetsNameTheFix(t *testing.T) {
	t.Setenv(AssetsEnv, "")
	if _, err := NewEnvironment(Options{}); !errors.Is(err, ErrNoAssets) {
		t.Fatalf("NewEnvironment without %s: err = %v, want ErrNoAssets", AssetsEnv, err)
	}
	if _, _, err := Start(Options{}); !errors.Is(err, ErrNoAssets) {
		t.Fatalf("Start without %s: err = %v, want ErrNoAssets", AssetsEnv, err)
	}
	if _, err := Kubectl(); !errors.Is(err, ErrNoAssets) {
		t.Fatalf("Kubectl without %s: err = %v, want ErrNoAssets", AssetsEnv, err)
	}
	for _, fix := range []string{"make envtest-assets", "make test", AssetsEnv} {
		if !strings.Contains(ErrNoAssets.Error(), fix) {
			t.Errorf("ErrNoAssets does not name %q: %s", fix, ErrNoAssets)
		}
	}
}

func TestKubectlMissingFromAssets(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(AssetsEnv, dir)
	if _, err := Kubectl(); err == nil || !strings.Contains(err.Error(), "make envtest-assets") {
		t.Fatalf("Kubectl with an empty %s: err = %v", AssetsEnv, err)
	}
	kubectl := filepath.Join(dir, "kubectl")
	if err := os.WriteFile(kubectl, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Kubectl(); err != nil || got != kubectl {
		t.Fatalf("Kubectl() = %q, %v; want %s", got, err, kubectl)
	}
}

func TestNewEnvironment(t *testing.T) {
	assets := t.TempDir()
	t.Setenv(AssetsEnv, assets)
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	crds := filepath.Join(root, "config", "crd", "bases")

	env, err := NewEnvironment(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if env.BinaryAssetsDirectory != assets {
		t.Errorf("BinaryAssetsDirectory = %q, want %q", env.BinaryAssetsDirectory, assets)
	}
	if len(env.CRDDirectoryPaths) != 1 || env.CRDDirectoryPaths[0] != crds || !env.ErrorIfCRDPathMissing {
		t.Errorf("CRDs %v (missing is an error: %v); want [%s], true", env.CRDDirectoryPaths, env.ErrorIfCRDPathMissing, crds)
	}
	if len(env.WebhookInstallOptions.Paths) != 0 {
		t.Errorf("webhook paths %v without Options.Webhooks", env.WebhookInstallOptions.Paths)
	}

	env, err = NewEnvironment(Options{Webhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := env.WebhookInstallOptions.Paths; len(p) != 1 || p[0] != filepath.Join(root, "config", "webhook") {
		t.Errorf("webhook paths %v, want [config/webhook]", p)
	}
	if len(env.CRDDirectoryPaths) != 1 {
		t.Errorf("CRDs %v with Options.Webhooks; want them too", env.CRDDirectoryPaths)
	}

	env, err = NewEnvironment(Options{NoCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(env.CRDDirectoryPaths) != 0 || env.ErrorIfCRDPathMissing {
		t.Errorf("CRDs %v with Options.NoCRDs", env.CRDDirectoryPaths)
	}
}
