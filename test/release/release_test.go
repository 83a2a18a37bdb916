//go:build release

// Package release runs `make release` as a maintainer does and checks what it wrote: every
// file in checksums.txt, the manager image (an OCI archive) named by digest in install.yaml and
// in the chart, the binary inside it and kubectl-plan printing the version, kubectl-plan built
// for each platform it is named for, and the krew manifest valid for krew-index's validator and
// installable by krew itself from the archive. Needs podman (make cluster-deps).
//
// Run it with `make test-release` (about the time of four kubectl-plan builds, three of them
// cross-compiled, on a cold cache).
package release

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/harness-dev/planmode-operator/test/framework"
)

const (
	version = "v0.0.0-releasetest.1"
	repo    = "registry.example.com/platform/planmode-operator"
	baseURL = "https://downloads.example.com/planmode/" + version
)

var platforms = []struct{ os, arch string }{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

func TestRelease(t *testing.T) {
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "release")
	cmd := exec.Command("make", "release", "VERSION="+version)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "RELEASE_DIR="+dir, "IMAGE_REPOSITORY="+repo, "RELEASE_URL="+baseURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
	commit := strings.TrimSpace(run(t, root, "git", "rev-parse", "HEAD"))
	env := readEnv(t, filepath.Join(dir, "release.env"))
	digest := strings.TrimPrefix(env["IMAGE"], repo+"@")
	if env["VERSION"] != version || env["COMMIT"] != commit || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("release.env = %v; want version %s, commit %s, image %s@sha256:...", env, version, commit, repo)
	}

	t.Run("checksums", func(t *testing.T) {
		sums := readChecksums(t, filepath.Join(dir, "checksums.txt"))
		want := []string{"planmode-operator.oci.tar", "install.yaml", "planmode-operator-0.0.0-releasetest.1.tgz", "plan.yaml"}
		for _, p := range platforms {
			want = append(want, archive(p.os, p.arch))
		}
		if len(sums) != len(want) {
			t.Errorf("checksums.txt lists %d files, want %d: %v", len(sums), len(want), sums)
		}
		for _, f := range want {
			if got := fileSHA256(t, filepath.Join(dir, f)); sums[f] != got {
				t.Errorf("%s: checksums.txt says %q, the file is %s", f, sums[f], got)
			}
		}
	})

	t.Run("the image: its digest, and the manager inside it names the version", func(t *testing.T) {
		manifestDigest, manager := managerFromOCI(t, filepath.Join(dir, "planmode-operator.oci.tar"))
		if manifestDigest != digest {
			t.Fatalf("the OCI archive's manifest is %s; release.env pins %s", manifestDigest, digest)
		}
		if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
			out := run(t, "", manager, "--version")
			if !strings.HasPrefix(out, "manager "+version+" (commit "+commit[:12]) {
				t.Errorf("manager --version = %q, want manager %s (commit %s...", out, version, commit[:12])
			}
		}
	})

	t.Run("install.yaml pins the image by digest and labels every object with the version", func(t *testing.T) {
		docs := splitYAML(t, filepath.Join(dir, "install.yaml"))
		images := 0
		for _, d := range docs {
			var obj struct {
				metav1.TypeMeta   `json:",inline"`
				metav1.ObjectMeta `json:"metadata"`
			}
			decodeInto(t, d, &obj)
			if obj.Labels["app.kubernetes.io/version"] != version {
				t.Errorf("%s %s: label app.kubernetes.io/version = %q", obj.Kind, obj.Name, obj.Labels["app.kubernetes.io/version"])
			}
			if obj.Kind == "Deployment" {
				images++
				if img := deploymentImage(t, d); img != env["IMAGE"] {
					t.Errorf("the manager Deployment runs %s, want %s", img, env["IMAGE"])
				}
			}
		}
		if images != 1 {
			t.Errorf("install.yaml has %d Deployments, want the manager's", images)
		}
		committed := splitYAML(t, filepath.Join(root, "dist", "install.yaml"))
		if len(docs) != len(committed) {
			t.Errorf("install.yaml has %d objects, dist/install.yaml %d", len(docs), len(committed))
		}
	})

	t.Run("the chart is at the version, with the image pinned by the same digest", func(t *testing.T) {
		ch, err := loader.Load(filepath.Join(dir, "planmode-operator-0.0.0-releasetest.1.tgz"))
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != "0.0.0-releasetest.1" || ch.Metadata.AppVersion != version {
			t.Errorf("Chart.yaml version %s appVersion %s", ch.Metadata.Version, ch.Metadata.AppVersion)
		}
		kv, _ := common.ParseKubeVersion("v1.37.2")
		caps := common.DefaultCapabilities.Copy()
		caps.KubeVersion = *kv
		vals, err := util.ToRenderValues(ch, map[string]any{}, common.ReleaseOptions{Name: "planmode", Namespace: "planmode-system", IsInstall: true}, caps)
		if err != nil {
			t.Fatal(err)
		}
		out, err := engine.Render(ch, vals)
		if err != nil {
			t.Fatal(err)
		}
		if img := deploymentImage(t, []byte(out["planmode-operator/templates/deployment-controller-manager.yaml"])); img != env["IMAGE"] {
			t.Errorf("the chart's manager Deployment runs %s, want %s", img, env["IMAGE"])
		}
	})

	t.Run("kubectl-plan for each platform", func(t *testing.T) {
		for _, p := range platforms {
			bin := extractOnly(t, filepath.Join(dir, archive(p.os, p.arch)), "kubectl-plan")
			checkPlatform(t, bin, p.os, p.arch)
			if p.os == runtime.GOOS && p.arch == runtime.GOARCH {
				if out := run(t, "", bin, "--version"); !strings.HasPrefix(out, "kubectl-plan "+version+" (commit "+commit[:12]) {
					t.Errorf("kubectl-plan --version = %q", out)
				}
			}
		}
	})

	t.Run("krew validates the manifest and installs the plugin from the archive", func(t *testing.T) {
		krewDir := strings.TrimSpace(run(t, root, filepath.Join(root, "hack", "krew.sh")))
		manifest := filepath.Join(dir, "plan.yaml")
		var plugin struct {
			Spec struct {
				Version   string `json:"version"`
				Platforms []struct {
					Selector struct {
						MatchLabels map[string]string `json:"matchLabels"`
					} `json:"selector"`
					URI    string `json:"uri"`
					SHA256 string `json:"sha256"`
				} `json:"platforms"`
			} `json:"spec"`
		}
		raw, err := os.ReadFile(manifest)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &plugin); err != nil {
			t.Fatal(err)
		}
		if plugin.Spec.Version != version || len(plugin.Spec.Platforms) != len(platforms) {
			t.Fatalf("plan.yaml: version %s, %d platforms", plugin.Spec.Version, len(plugin.Spec.Platforms))
		}
		for _, p := range plugin.Spec.Platforms {
			a := archive(p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"])
			if p.URI != baseURL+"/"+a || p.SHA256 != fileSHA256(t, filepath.Join(dir, a)) {
				t.Errorf("plan.yaml platform %v: uri %s sha256 %s, want %s/%s and the archive's sum", p.Selector.MatchLabels, p.URI, p.SHA256, baseURL, a)
			}
		}
		run(t, "", filepath.Join(krewDir, "validate-krew-manifest"), "-manifest", manifest, "-skip-install")

		krewRoot := t.TempDir()
		kenv := []string{"KREW_ROOT=" + krewRoot, "KREW_NO_UPGRADE_CHECK=1", "HOME=" + t.TempDir()}
		install := exec.Command(filepath.Join(krewDir, "krew"), "install", "--manifest="+manifest, "--archive="+filepath.Join(dir, archive(runtime.GOOS, runtime.GOARCH)))
		install.Env = append(os.Environ(), kenv...)
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("krew install: %v\n%s", err, out)
		}
		out := run(t, "", filepath.Join(krewRoot, "bin", "kubectl-plan"), "--version")
		if !strings.HasPrefix(out, "kubectl-plan "+version) {
			t.Errorf("the plugin krew installed prints %q", out)
		}
	})
}

func archive(goos, goarch string) string {
	return fmt.Sprintf("kubectl-plan_%s_%s_%s.tar.gz", version, goos, goarch)
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m
}

func readChecksums(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		sum, file, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q: want sha256sum's format", line)
		}
		m[file] = sum
	}
	return m
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// managerFromOCI reads an OCI archive with one image: its manifest digest, and the /manager
// file of its one layer, written to a temporary file.
func managerFromOCI(t *testing.T, path string) (digest, manager string) {
	t.Helper()
	blobs := map[string][]byte{}
	var index struct {
		Manifests []struct {
			Digest string `json:"digest"`
		} `json:"manifests"`
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.Name == "index.json":
			if err := json.Unmarshal(b, &index); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(h.Name, "blobs/sha256/"):
			blobs["sha256:"+strings.TrimPrefix(h.Name, "blobs/sha256/")] = b
		}
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json names %d manifests, want one", len(index.Manifests))
	}
	digest = index.Manifests[0].Digest
	raw := blobs[digest]
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != digest {
		t.Fatalf("the manifest blob does not hash to %s", digest)
	}
	var m struct {
		Layers []struct {
			Digest    string `json:"digest"`
			MediaType string `json:"mediaType"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 1 || !strings.HasSuffix(m.Layers[0].MediaType, "tar+gzip") {
		t.Fatalf("layers %+v: want one gzip layer (FROM scratch, one COPY)", m.Layers)
	}
	zr, err := gzip.NewReader(strings.NewReader(string(blobs[m.Layers[0].Digest])))
	if err != nil {
		t.Fatal(err)
	}
	lr := tar.NewReader(zr)
	for {
		h, err := lr.Next()
		if err != nil {
			t.Fatalf("no /manager in the image's layer: %v", err)
		}
		if strings.TrimPrefix(h.Name, "/") == "manager" {
			manager = filepath.Join(t.TempDir(), "manager")
			b, err := io.ReadAll(lr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(manager, b, 0o755); err != nil {
				t.Fatal(err)
			}
			return digest, manager
		}
	}
}

// extractOnly extracts a tar.gz that must hold exactly the one file name.
func extractOnly(t *testing.T, path, name string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != name || out != "" {
			t.Fatalf("%s holds %s; want only %s", filepath.Base(path), h.Name, name)
		}
		if h.Uid != 0 || h.Gid != 0 || h.ModTime.Unix() != 0 || h.Mode&0o111 == 0 {
			t.Errorf("%s: %s owner %d:%d mtime %s mode %o; want root, time 0, executable", filepath.Base(path), name, h.Uid, h.Gid, h.ModTime, h.Mode)
		}
		out = filepath.Join(t.TempDir(), name)
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out == "" {
		t.Fatalf("%s is empty", path)
	}
	return out
}

// checkPlatform reads the executable's header: ELF for linux, Mach-O for darwin, and its
// machine.
func checkPlatform(t *testing.T, path, goos, goarch string) {
	t.Helper()
	switch goos {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s/%s: not ELF: %v", goos, goarch, err)
		}
		defer func() { _ = f.Close() }()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
		if f.Machine != want {
			t.Errorf("%s/%s: ELF machine %s", goos, goarch, f.Machine)
		}
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("%s/%s: not Mach-O: %v", goos, goarch, err)
		}
		defer func() { _ = f.Close() }()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		if f.Cpu != want {
			t.Errorf("%s/%s: Mach-O CPU %s", goos, goarch, f.Cpu)
		}
	}
}

// splitYAML splits a multi-document YAML file into its documents.
func splitYAML(t *testing.T, path string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

func decodeInto(t *testing.T, doc []byte, v any) {
	t.Helper()
	if err := yaml.Unmarshal(doc, v); err != nil {
		t.Fatal(err)
	}
}

// deploymentImage is the image of a Deployment's only container.
func deploymentImage(t *testing.T, doc []byte) string {
	t.Helper()
	var d appsv1.Deployment
	decodeInto(t, doc, &d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment %s has %d containers, want the manager's", d.Name, len(d.Spec.Template.Spec.Containers))
	}
	return d.Spec.Template.Spec.Containers[0].Image
}
