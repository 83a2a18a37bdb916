package manifests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The test cluster's overlay (test/cluster/overlay) is dist/install.yaml without cert-manager:
// the same objects less the Certificates and Issuers, and no CA-injection annotation left for
// a cainjector that is not there. dist/install.yaml itself keeps cert-manager.
func TestClusterOverlayIsInstallWithoutCertManager(t *testing.T) {
	root := repoRoot(t)
	var out, errb bytes.Buffer
	cmd := exec.Command(kubectlPath(t, root), "kustomize", "--load-restrictor=LoadRestrictionsNone",
		filepath.Join(root, "test", "cluster", "overlay"))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize test/cluster/overlay: %v\n%s", err, errb.String())
	}
	install, err := os.ReadFile(filepath.Join(root, "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	key := func(kind, ns, name string) string { return kind + " " + ns + "/" + name }
	overlay := map[string]bool{}
	for _, o := range decodeAll(t, out.Bytes()) {
		overlay[key(o.GetKind(), o.GetNamespace(), o.GetName())] = true
		if _, ok := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; ok {
			t.Errorf("%s %s keeps cert-manager.io/inject-ca-from", o.GetKind(), o.GetName())
		}
	}
	var dropped []string
	for _, o := range decodeAll(t, install) {
		k := key(o.GetKind(), o.GetNamespace(), o.GetName())
		certManager := strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/")
		switch {
		case certManager && overlay[k]:
			t.Errorf("the overlay keeps cert-manager's %s", k)
		case certManager:
			dropped = append(dropped, k)
		case !overlay[k]:
			t.Errorf("the overlay lost %s", k)
		}
	}
	if len(dropped) == 0 {
		t.Error("dist/install.yaml has no cert-manager objects: it must keep cert-manager for users")
	}
}

// The Dockerfile and the test cluster's images build the manager with the same script, so the
// registry image and the offline FROM scratch image carry the same binary.
func TestImagesShareOneStaticBuild(t *testing.T) {
	root := repoRoot(t)
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	docker := read("Dockerfile")
	for _, want := range []string{"COPY hack/static-build.sh hack/static-build.sh", "hack/static-build.sh manager ./cmd/manager", "USER 65532:65532"} {
		if !strings.Contains(docker, want) {
			t.Errorf("Dockerfile does not contain %q", want)
		}
	}
	images := read("hack/cluster/images.sh")
	for _, want := range []string{`hack/static-build.sh "$dir/$1" "$2"`, "image manager ./cmd/manager", "FROM scratch", "USER 65532:65532"} {
		if !strings.Contains(images, want) {
			t.Errorf("hack/cluster/images.sh does not contain %q", want)
		}
	}
	if strings.Contains(docker, "go build") {
		t.Error("the Dockerfile runs its own go build: build through hack/static-build.sh")
	}
}
