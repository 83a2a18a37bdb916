package manifests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/webhooks"
)

// The GitOps folder renders, and every PlanModeConfig in it passes the admission webhook's own
// validation (the raw-JSON rules: no unknown keys, a non-blank string section, the size cap).
func TestGitOpsConfigsRenderAndAdmit(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command(kubectlPath(t, root), "kustomize", filepath.Join(root, "config", "samples", "gitops", "config")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/samples/gitops/config: %v", err)
	}
	objs := decodeAll(t, out)
	cfgs := find(objs, "PlanModeConfig")
	if len(cfgs) < 1 || len(cfgs) != len(objs) {
		t.Fatalf("the GitOps folder renders %d objects, %d PlanModeConfigs; want only PlanModeConfigs", len(objs), len(cfgs))
	}
	names := map[string]bool{}
	for _, u := range cfgs {
		names[u.GetName()] = true
		if u.GetNamespace() != "team-a" {
			t.Errorf("PlanModeConfig %s in namespace %q, want team-a", u.GetName(), u.GetNamespace())
		}
		raw, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		if errs := webhooks.ValidatePlanModeConfigJSON(raw); len(errs) > 0 {
			t.Errorf("PlanModeConfig %s would be refused at admission: %v", u.GetName(), errs.ToAggregate())
		}
		cfg := convert[agentsv1alpha1.PlanModeConfig](t, u)
		if cfg.Spec.Section == "" {
			t.Errorf("PlanModeConfig %s has an empty section", u.GetName())
		}
	}
	if !names[agentsv1alpha1.DefaultPlanModeConfigName] {
		t.Error("the GitOps folder has no PlanModeConfig named default (the namespace default)")
	}
	// The Argo CD Application and the Flux objects point at that folder.
	for file, kind := range map[string]string{"argocd/application.yaml": "Application", "flux/gitrepository.yaml": "GitRepository",
		"flux/planmode-kustomization.yaml": "Kustomization"} {
		data, err := os.ReadFile(filepath.Join(root, "config", "samples", "gitops", file))
		if err != nil {
			t.Fatal(err)
		}
		got := decodeAll(t, data)
		if len(got) != 1 || got[0].GetKind() != kind {
			t.Errorf("%s: want one %s", file, kind)
		}
	}
}
