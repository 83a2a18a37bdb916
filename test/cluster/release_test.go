//go:build cluster

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// releaseRepository is the image repository test releases name (loaded into the cluster's
// containerd under it, by tag and by digest).
const releaseRepository = "localhost/planmode-operator"

// release is one release of the operator: its install manifest, its Helm chart and its image
// (repository@digest), as hack/release.sh writes them, the image loaded into the cluster.
type release struct {
	Version, Image, Install, Chart string
}

// buildRelease runs hack/release.sh (without the kubectl-plan archives) for version, and loads
// its image into the cluster.
func buildRelease(version string) release {
	GinkgoHelper()
	dir := filepath.Join(workDir, "release-"+version)
	run(root, []string{"VERSION=" + version, "RELEASE_DIR=" + dir, "RELEASE_BINARIES=0",
		"IMAGE_REPOSITORY=" + releaseRepository, "KUBECTL=" + kubectl}, filepath.Join(root, "hack", "release.sh"))
	env := readEnvFile(filepath.Join(dir, "release.env"))
	Expect(env).To(HaveKeyWithValue("VERSION", version))
	r := release{Version: version, Image: env["IMAGE"], Install: filepath.Join(dir, "install.yaml"), Chart: filepath.Join(dir, env["CHART"])}
	loadImage(filepath.Join(dir, "planmode-operator.oci.tar"), releaseRepository+":"+version, r.Image)
	return r
}

// previousRelease is the operator as of commit, the way it shipped then: its source from git,
// its manager built with its own hack/static-build.sh into an image (hack/image.sh), and its
// dist/install.yaml.
func previousRelease(commit string) release {
	GinkgoHelper()
	dir := filepath.Join(workDir, "previous")
	src := filepath.Join(dir, "src")
	Expect(os.MkdirAll(src, 0o755)).To(Succeed())
	out, err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "commit %s, the release the upgrade starts from, is not in this clone (a shallow clone? git fetch --unshallow): %s", commit, out)
	run(root, nil, "bash", "-c", fmt.Sprintf("set -o pipefail; git archive --format=tar %s | tar -x -C %s", commit, src))
	version := "v0.0.0-" + commit[:12]
	run(src, []string{"VERSION=" + version, "COMMIT=" + commit}, filepath.Join(src, "hack", "static-build.sh"), filepath.Join(dir, "manager"), "./cmd/manager")
	ref := releaseRepository + ":" + version
	digest := strings.TrimSpace(run(root, nil, filepath.Join(root, "hack", "image.sh"), filepath.Join(dir, "manager"), ref, filepath.Join(dir, "image.tar")))
	Expect(digest).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
	r := release{Version: version, Image: releaseRepository + "@" + digest, Install: filepath.Join(src, "dist", "install.yaml")}
	loadImage(filepath.Join(dir, "image.tar"), ref, r.Image)
	return r
}

// loadImage imports an OCI archive into the cluster's containerd under ref and image
// (repository@digest), with hack/cluster/images.sh.
func loadImage(archive, ref, image string) {
	GinkgoHelper()
	_, digest, ok := strings.Cut(image, "@")
	Expect(ok).To(BeTrue(), "image %s is not pinned by digest", image)
	run(root, []string{"CLUSTER_DIR=" + clusterDir}, filepath.Join(root, "hack", "cluster", "images.sh"), "load", archive, ref, digest)
}

// run runs a command in dir with env added and fails the spec, with its output, when it fails.
func run(dir string, env []string, name string, args ...string) string {
	GinkgoHelper()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	Expect(err).NotTo(HaveOccurred(), "%s %s: %s%s", name, strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String()
}

// helm runs the Helm v4 binary hack/helm.sh built, as the cluster admin.
func helm(args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, helmBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+filepath.Join(workDir, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(workDir, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(workDir, "helm", "data"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func helmOK(args ...string) string {
	GinkgoHelper()
	out, err := helm(args...)
	Expect(err).NotTo(HaveOccurred(), "helm %s: %s", strings.Join(args, " "), out)
	return out
}

// admissionProbe writes through the admission webhooks while it runs, as users and agents do
// during an upgrade: four writers, each a merge patch of its own PlanModeConfig's section every
// 50ms (the PlanModeConfig webhook; enough API traffic to keep several connections from the API
// server to the webhook replicas in use), and, when a session is set, a plan-mode toggle of it
// every second (the AgentSession webhook). Each write is tried once: a refused or failed one is
// counted, never retried.
type admissionProbe struct {
	admitted, failed atomic.Int64
	toggles          atomic.Int64
	mu               sync.Mutex
	errs             []string
	stop             context.CancelFunc
	wg               sync.WaitGroup
}

const probeWriters = 4

func startAdmissionProbe(config, session string) *admissionProbe {
	GinkgoHelper()
	p := &admissionProbe{}
	pctx, stop := context.WithCancel(ctx)
	p.stop = stop
	for w := range probeWriters {
		cfg := &agentsv1alpha1.PlanModeConfig{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: fmt.Sprintf("%s-%d", config, w)},
			Spec: agentsv1alpha1.PlanModeConfigSpec{Section: "write 0"}}
		_ = k8s.Delete(ctx, cfg.DeepCopy())
		Eventually(func() error { return k8s.Create(ctx, cfg.DeepCopy()) }).WithTimeout(settle).WithPolling(poll).Should(Succeed())
		p.wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer p.wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := 1; ; i++ {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
				p.record(cfg.Name, i, k8s.Patch(ctx, cfg.DeepCopy(), client.RawPatch(types.MergePatchType,
					fmt.Appendf(nil, `{"spec":{"section":"write %d"}}`, i))))
				if w == 0 && session != "" && i%20 == 0 {
					p.toggles.Add(1)
					p.record("AgentSession "+session, i, k8s.Patch(ctx, sessionRef(session), client.RawPatch(types.MergePatchType,
						fmt.Appendf(nil, `{"spec":{"planMode":{"active":%v}}}`, i%40 == 0))))
				}
			}
		}()
	}
	return p
}

func (p *admissionProbe) record(what string, i int, err error) {
	if err == nil {
		p.admitted.Add(1)
		return
	}
	p.failed.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) < 20 {
		p.errs = append(p.errs, fmt.Sprintf("%s write %d at %s: %v", what, i, time.Now().Format("15:04:05.000"), err))
	}
}

// Stop ends the probe and returns what it saw.
func (p *admissionProbe) Stop() (admitted, failed int64, errs []string) {
	p.stop()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.admitted.Load(), p.failed.Load(), p.errs
}
