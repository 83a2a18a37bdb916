package manifests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
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

// argocdHealth runs the sample Argo CD health check (Lua, on the Lua VM Argo CD uses) on obj.
func argocdHealth(t *testing.T, obj any) (status, message string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "samples", "gitops", "argocd", "argocd-cm-health.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatalf("argocd-cm-health.yaml: %v", err)
	}
	script := cm.Data["resource.customizations.health.agents.harness.dev_AgentSession"]
	if script == "" {
		t.Fatal("argocd-cm-health.yaml has no AgentSession health check")
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, m))
	// Argo CD runs the script as a function body whose return value is the health table.
	if err := L.DoString("function health()\n" + script + "\nend\nhs_result = health()"); err != nil {
		t.Fatalf("health check script: %v", err)
	}
	hs, ok := L.GetGlobal("hs_result").(*lua.LTable)
	if !ok {
		t.Fatal("the health check returned no table")
	}
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case float64:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	}
	return lua.LNil
}

// The statuses are the shapes the manager writes (see test/e2e/kstatus_test.go, where kstatus
// reads the same states from the real manager).
func TestArgoCDHealthCheck(t *testing.T) {
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "observedGeneration": 2,
			"lastTransitionTime": "2026-11-30T06:00:00Z"}
	}
	session := func(gen int, status map[string]any) map[string]any {
		o := map[string]any{"apiVersion": "agents.harness.dev/v1alpha1", "kind": "AgentSession",
			"metadata": map[string]any{"name": "s", "namespace": "team-a", "generation": gen}, "spec": map[string]any{"sessionID": "s"}}
		if status != nil {
			o["status"] = status
		}
		return o
	}
	for _, c := range []struct {
		name, want, msg string
		obj             map[string]any
	}{
		{"not reconciled yet", "Progressing", "Waiting for the planmode manager to observe the session", session(1, nil)},
		{"in sync", "Healthy", "plan mode on is committed in the session log", session(2, map[string]any{"observedGeneration": 2,
			"conditions": []any{cond("Ready", "True", "InSync", "plan mode on is committed in the session log")}})},
		{"pending selection", "Progressing", "plan mode on is selected and waits for the agent's next step boundary", session(2, map[string]any{"observedGeneration": 2,
			"conditions": []any{cond("Ready", "False", "SelectionPending", "plan mode on is selected and waits for the agent's next step boundary"),
				cond("Reconciling", "True", "SelectionPending", "plan mode on is selected and waits for the agent's next step boundary")}})},
		{"log store down", "Degraded", "LogStoreUnavailable: read the log tail: connection refused", session(2, map[string]any{"observedGeneration": 2,
			"conditions": []any{cond("Ready", "False", "LogStoreUnavailable", "read the log tail: connection refused"),
				cond("Stalled", "True", "LogStoreUnavailable", "read the log tail: connection refused")}})},
		{"stale observedGeneration", "Progressing", "The manager has not observed generation 3 yet", session(3, map[string]any{"observedGeneration": 2,
			"conditions": []any{cond("Ready", "True", "InSync", "plan mode off is committed in the session log")}})},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, msg := argocdHealth(t, c.obj)
			if status != c.want || msg != c.msg {
				t.Errorf("health = %s %q, want %s %q", status, msg, c.want, c.msg)
			}
		})
	}
}
