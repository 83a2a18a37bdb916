package manifests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/cel-go/cel"
	"sigs.k8s.io/yaml"

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
	cfgs, policies := find(objs, "PlanModeConfig"), find(objs, "ReviewPolicy")
	if len(cfgs) < 1 || len(policies) != 1 || len(cfgs)+len(policies) != len(objs) {
		t.Fatalf("the GitOps folder renders %d objects, %d PlanModeConfigs, %d ReviewPolicies; want PlanModeConfigs and one ReviewPolicy", len(objs), len(cfgs), len(policies))
	}
	policy := convert[agentsv1alpha1.ReviewPolicy](t, policies[0])
	if errs := webhooks.ValidateReviewPolicy(policy); len(errs) > 0 || policy.Namespace != "team-a" {
		t.Errorf("ReviewPolicy %s/%s would be refused at admission: %v", policy.Namespace, policy.Name, errs.ToAggregate())
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

// The statuses are the shapes the manager writes (see test/e2e/kstatus_test.go, where kstatus
// reads the same states from the real manager).
// cond is one status condition as the manager writes it.
func cond(typ, status, reason, msg string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": 2,
		"lastTransitionTime": "2026-11-30T06:00:00Z"}
}

// session is an AgentSession of generation gen with status (nil: none yet), as JSON decodes it.
func session(gen int64, status map[string]any) map[string]any {
	o := map[string]any{"apiVersion": "agents.harness.dev/v1alpha1", "kind": "AgentSession",
		"metadata": map[string]any{"name": "s", "namespace": "team-a", "generation": gen}, "spec": map[string]any{"sessionID": "s"}}
	if status != nil {
		o["status"] = status
	}
	return o
}

const awaitingMsg = "plan review r1 (revision 1) awaits 1 more approval(s) (1 of 2, ReviewPolicy team-a/default): kubectl plan review s -n team-a"

// awaitingStatus is what the manager writes while a plan waits for people (controllers,
// setReviewConditions): Ready stays True (the plan state is in sync), AwaitingReview and
// Reconciling are True.
func awaitingStatus() map[string]any {
	return map[string]any{"observedGeneration": 2, "conditions": []any{
		cond("Ready", "True", "InSync", ""),
		cond("AwaitingReview", "True", "ReviewPending", awaitingMsg),
		cond("Reconciling", "True", "ReviewPending", awaitingMsg)}}
}

// The Flux health expressions of config/samples/gitops/flux/agentsession-health.yaml, evaluated
// the way kustomize-controller does (CEL with optional types, the object's top-level fields as
// variables; inProgress, then failed, then current), name each session state as kstatus would,
// and a plan awaiting review as in progress.
func TestFluxHealthExpressions(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "samples", "gitops", "flux", "agentsession-health.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ks struct {
		Spec struct {
			HealthCheckExprs []struct {
				Kind, InProgress, Failed, Current string
			} `json:"healthCheckExprs"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &ks); err != nil || len(ks.Spec.HealthCheckExprs) != 1 || ks.Spec.HealthCheckExprs[0].Kind != "AgentSession" {
		t.Fatalf("want one AgentSession health check: %v %+v", err, ks)
	}
	h := ks.Spec.HealthCheckExprs[0]
	env, err := cel.NewEnv(cel.OptionalTypes(), cel.Variable("apiVersion", cel.DynType), cel.Variable("kind", cel.DynType),
		cel.Variable("metadata", cel.DynType), cel.Variable("spec", cel.DynType), cel.Variable("status", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(expr string, obj map[string]any) bool {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("compile %q: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		vars := map[string]any{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": obj["metadata"], "spec": obj["spec"], "status": map[string]any{}}
		if st, ok := obj["status"]; ok {
			vars["status"] = st
		}
		out, _, err := prg.Eval(vars)
		if err != nil {
			t.Fatalf("eval %q: %v", expr, err)
		}
		return out.Value() == true
	}
	health := func(obj map[string]any) string {
		switch {
		case eval(h.InProgress, obj):
			return "InProgress"
		case eval(h.Failed, obj):
			return "Failed"
		case eval(h.Current, obj):
			return "Current"
		}
		return "InProgress"
	}
	for _, c := range []struct {
		name, want string
		obj        map[string]any
	}{
		{"not reconciled yet", "InProgress", session(1, nil)},
		{"in sync", "Current", session(2, map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("Ready", "True", "InSync", "")}})},
		{"a plan awaiting review", "InProgress", session(2, awaitingStatus())},
		{"log store down", "Failed", session(2, map[string]any{"observedGeneration": int64(2), "conditions": []any{
			cond("Ready", "False", "LogStoreUnavailable", ""), cond("Stalled", "True", "LogStoreUnavailable", "")}})},
		{"stale observedGeneration", "InProgress", session(3, map[string]any{"observedGeneration": int64(2), "conditions": []any{cond("Ready", "True", "InSync", "")}})},
	} {
		if got := health(c.obj); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
