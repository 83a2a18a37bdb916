// Package manifests checks the deployable install: config/default renders with the real
// kubectl (the control plane's version, built by hack/envtest-binaries.sh), dist/install.yaml
// is that rendering, and the manager Deployment passes the restricted Pod Security Standard
// (k8s.io/pod-security-admission's own evaluator) and the operational requirements.
package manifests

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// kubectlPath is the hack-built kubectl: $KUBEBUILDER_ASSETS/kubectl (make test sets it), else
// bin/k8s/1.37.2-linux-amd64/kubectl.
func kubectlPath(t *testing.T, root string) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(root, "bin", "k8s", "1.37.2-linux-amd64")
	}
	p := filepath.Join(dir, "kubectl")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("kubectl not found at %s: run `make envtest-assets` (hack/envtest-binaries.sh): %v", p, err)
	}
	return p
}

// render runs `kubectl kustomize config/default`.
func render(t *testing.T) []byte {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command(kubectlPath(t, root), "kustomize", filepath.Join(root, "config", "default"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, errb.String())
	}
	return out.Bytes()
}

func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decode the rendered install: %v", err)
		}
		if m == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &v, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return &v
}

func TestInstallIsUpToDate(t *testing.T) {
	rendered := render(t)
	committed, err := os.ReadFile(filepath.Join(repoRoot(t), "dist", "install.yaml"))
	if err != nil {
		t.Fatalf("read dist/install.yaml: %v (run `make build-installer`)", err)
	}
	if !bytes.Equal(rendered, committed) {
		t.Fatal("dist/install.yaml differs from `kubectl kustomize config/default`: run `make build-installer` and commit the result")
	}
}

func TestInstallRendersCompletely(t *testing.T) {
	objs := decodeAll(t, render(t))
	want := map[string]int{"CustomResourceDefinition": 3, "Namespace": 1, "ServiceAccount": 1, "Deployment": 1,
		"ValidatingWebhookConfiguration": 1, "MutatingWebhookConfiguration": 1, "Certificate": 2, "Issuer": 2, "Service": 2}
	for kind, n := range want {
		if got := len(find(objs, kind)); got != n {
			t.Errorf("%d %s in the install, want %d", got, kind, n)
		}
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && ns != "planmode-system" {
			t.Errorf("%s %s is in namespace %q, want planmode-system", o.GetKind(), o.GetName(), ns)
		}
		if o.GetKind() == "Secret" {
			t.Errorf("the install ships Secret %s: re-applying it would overwrite the operator's real one", o.GetName())
		}
	}
	if ns := find(objs, "Namespace"); len(ns) == 1 {
		if got := ns[0].GetLabels()["pod-security.kubernetes.io/enforce"]; got != "restricted" {
			t.Errorf("namespace label pod-security.kubernetes.io/enforce = %q, want restricted", got)
		}
	}
	// cert-manager's cainjector must find the Certificate the webhook is served with.
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		if wc := find(objs, kind); len(wc) == 1 {
			if got := wc[0].GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "planmode-system/planmode-serving-cert" {
				t.Errorf("%s inject-ca-from = %q, want planmode-system/planmode-serving-cert", kind, got)
			}
		}
	}
	// Least privilege: no wildcard verbs, resources or API groups in any role.
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, o := range find(objs, kind) {
			for _, r := range convert[rbacv1.ClusterRole](t, o).Rules {
				for _, s := range append(append(append([]string{}, r.Verbs...), r.Resources...), r.APIGroups...) {
					if s == "*" {
						t.Errorf("%s %s has a wildcard rule %+v", kind, o.GetName(), r)
					}
				}
			}
		}
	}
}

func TestManagerDeployment(t *testing.T) {
	deps := find(decodeAll(t, render(t)), "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments in the install, want 1", len(deps))
	}
	d := convert[appsv1.Deployment](t, deps[0])
	spec := d.Spec.Template.Spec

	t.Run("restricted Pod Security Standard", func(t *testing.T) {
		ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
		if err != nil {
			t.Fatalf("policy evaluator: %v", err)
		}
		res := policy.AggregateCheckResults(ev.EvaluatePod(
			psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, &spec))
		if !res.Allowed {
			t.Fatalf("the manager pod violates the restricted Pod Security Standard: %s", res.ForbiddenDetail())
		}
		// The evaluator is live: the same pod with a writable, escalating root is refused.
		bad := spec.DeepCopy()
		yes := true
		bad.Containers[0].SecurityContext.AllowPrivilegeEscalation = &yes
		bad.SecurityContext.RunAsNonRoot = nil
		bad.Containers[0].SecurityContext.RunAsNonRoot = nil
		res = policy.AggregateCheckResults(ev.EvaluatePod(
			psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &d.Spec.Template.ObjectMeta, bad))
		if res.Allowed || !strings.Contains(res.ForbiddenReason(), "allowPrivilegeEscalation") || !strings.Contains(res.ForbiddenReason(), "runAsNonRoot") {
			t.Fatalf("a privilege-escalating root pod passed the restricted check: %+v", res)
		}
	})

	var c *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name == "manager" {
			c = &spec.Containers[i]
		}
	}
	if c == nil {
		t.Fatal("no container named manager")
	}
	nonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	if c.SecurityContext != nil && c.SecurityContext.RunAsNonRoot != nil {
		nonRoot = *c.SecurityContext.RunAsNonRoot
	}
	if !nonRoot {
		t.Error("the manager must run as non-root (runAsNonRoot: true)")
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the manager must have a read-only root filesystem")
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
			t.Errorf("no %s request", r)
		}
		if q, ok := c.Resources.Limits[r]; r == corev1.ResourceMemory && (!ok || q.IsZero()) {
			t.Errorf("no %s limit", r)
		}
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("liveness probe = %+v, want GET /healthz", c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness probe = %+v, want GET /readyz (it includes the log-store check)", c.ReadinessProbe)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--leader-elect", "--metrics-secure", "--health-probe-bind-address=:8081", "--webhook-cert-dir="} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "postgres://") || strings.Contains(args, "PLANMODE_LOG_STORE") || strings.Contains(args, "--log-store") {
		t.Errorf("manager args %q carry the log-store URL: it belongs in the environment, from the Secret", args)
	}
	var fromSecret bool
	for _, e := range c.Env {
		if e.Name == "PLANMODE_LOG_STORE" {
			fromSecret = e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
				e.ValueFrom.SecretKeyRef.Name != "" && e.ValueFrom.SecretKeyRef.Key != ""
		}
	}
	if !fromSecret {
		t.Error("PLANMODE_LOG_STORE must come from a Secret (valueFrom.secretKeyRef)")
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 {
		t.Error("replicas must be at least 1")
	}
	if spec.ServiceAccountName != "planmode-controller-manager" {
		t.Errorf("serviceAccountName = %q, want planmode-controller-manager", spec.ServiceAccountName)
	}
}
