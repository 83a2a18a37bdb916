package plancli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
)

// writeKubeconfig writes a kubeconfig with one context, "dev", to dir/kubeconfig.
func writeKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	const kc = `apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: dev
  context:
    cluster: dev
    user: me
- name: other
  context:
    cluster: dev
    user: me
current-context: dev
users:
- name: me
  user:
    token: t
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func optionsFor(kubeconfig, context string) *Options {
	f := genericclioptions.NewConfigFlags(false)
	f.KubeConfig = &kubeconfig
	if context != "" {
		f.Context = &context
	}
	return &Options{Flags: f}
}

// The store URL is resolved from --store, then the environment, then the kubeconfig's current
// (or --context) context, and survives a round trip through the kubeconfig file.
func TestStoreURLResolution(t *testing.T) {
	t.Setenv(StoreEnv, "")
	dir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dir)
	o := optionsFor(kubeconfig, "")
	if url, err := o.storeURL(""); err != nil || url != "" {
		t.Fatalf("no store anywhere: %q, %v", url, err)
	}
	if err := SetKubeconfigStore(kubeconfig, "sqlite:///from/kubeconfig.db"); err != nil {
		t.Fatal(err)
	}
	// The rest of the kubeconfig is intact.
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil || cfg.CurrentContext != "dev" || cfg.AuthInfos["me"].Token != "t" || len(cfg.Contexts) != 2 {
		t.Fatalf("kubeconfig after SetKubeconfigStore: %+v, %v", cfg, err)
	}
	if url, err := optionsFor(kubeconfig, "").storeURL(""); err != nil || url != "sqlite:///from/kubeconfig.db" {
		t.Fatalf("from the kubeconfig: %q, %v", url, err)
	}
	if url, _ := optionsFor(kubeconfig, "other").storeURL(""); url != "" {
		t.Fatalf("--context other picked up dev's store: %q", url)
	}
	t.Setenv(StoreEnv, "sqlite:///from/env.db")
	if url, _ := o.storeURL(""); url != "sqlite:///from/env.db" {
		t.Fatalf("the environment does not win over the kubeconfig: %q", url)
	}
	if url, _ := o.storeURL("sqlite:///from/flag.db"); url != "sqlite:///from/flag.db" {
		t.Fatalf("--store does not win: %q", url)
	}
}

// kubectl plan use-store writes the extension into the user's kubeconfig; a URL that is not a
// store is refused and changes nothing.
func TestUseStoreCommand(t *testing.T) {
	t.Setenv(StoreEnv, "")
	kubeconfig := writeKubeconfig(t, t.TempDir())
	before, _ := os.ReadFile(kubeconfig)
	if _, err := run(t, "use-store", "mysql://x", "--kubeconfig", kubeconfig); err == nil || !strings.Contains(err.Error(), `store URL "mysql://x"`) {
		t.Fatalf("use-store with a bad URL: %v", err)
	}
	if after, _ := os.ReadFile(kubeconfig); !bytes.Equal(before, after) {
		t.Fatal("a refused use-store changed the kubeconfig")
	}
	if _, err := run(t, "use-store", "sqlite:///srv/log.db", "--kubeconfig", kubeconfig, "--context", "other"); err != nil {
		t.Fatal(err)
	}
	if url, err := optionsFor(kubeconfig, "other").storeURL(""); err != nil || url != "sqlite:///srv/log.db" {
		t.Fatalf("after use-store: %q, %v", url, err)
	}
	if url, _ := optionsFor(kubeconfig, "").storeURL(""); url != "" {
		t.Fatalf("use-store --context other changed the current context too: %q", url)
	}
}
