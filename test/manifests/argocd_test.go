package manifests

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/yaml"
)

// The Argo CD health check for AgentSessions, in Argo CD's own resource_customizations layout
// (config/samples/gitops/argocd/health/<group>/<kind>/: health.lua, health_test.yaml,
// testdata/), run the way Argo CD runs a check from argocd-cm. Argo CD's util/lua cannot be
// built from the module proxy (its gitops-engine module is not published there), so argoLua
// below does what argo-cd v3.5's util/lua does (VM.ExecuteHealthLua): gopher-lua without the
// open libraries (argocd-cm checks run without them unless useOpenLibs is set), only package,
// base, table and a safe os opened, a one-second deadline, the object decoded into Lua tables
// as its decodeValue does, and the returned table read back through gopher-json.
func TestArgoCDHealthCheck(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "config", "samples", "gitops", "argocd", "health")
	found := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "health.lua" {
			return err
		}
		found++
		script, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		checkConfigMapScript(t, rel, string(script))
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(path), "health_test.yaml"))
		if err != nil {
			return err
		}
		var cases struct {
			Tests []struct {
				InputPath    string       `json:"inputPath"`
				HealthStatus healthStatus `json:"healthStatus"`
			} `json:"tests"`
		}
		if err := yaml.UnmarshalStrict(raw, &cases); err != nil {
			return err
		}
		if len(cases.Tests) == 0 {
			t.Errorf("%s/health_test.yaml has no tests", rel)
		}
		for _, c := range cases.Tests {
			t.Run(filepath.Join(rel, c.InputPath), func(t *testing.T) {
				in, err := os.ReadFile(filepath.Join(filepath.Dir(path), c.InputPath))
				if err != nil {
					t.Fatal(err)
				}
				var obj map[string]any
				if err := yaml.Unmarshal(in, &obj); err != nil {
					t.Fatal(err)
				}
				got, err := argoLua(obj, string(script))
				if err != nil {
					t.Fatalf("health.lua: %v", err)
				}
				if got != c.HealthStatus {
					t.Errorf("health = %+v, want %+v", got, c.HealthStatus)
				}
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no health.lua under config/samples/gitops/argocd/health")
	}
}

// checkConfigMapScript: the argocd-cm sample users merge carries the same script.
func checkConfigMapScript(t *testing.T, groupKind, script string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "samples", "gitops", "argocd", "argocd-cm-health.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatalf("argocd-cm-health.yaml: %v", err)
	}
	key := "resource.customizations.health." + strings.Replace(groupKind, string(filepath.Separator), "_", 1)
	if cm.Data[key] != script {
		t.Errorf("argocd-cm-health.yaml %s differs from %s/health.lua: copy the script into the ConfigMap", key, groupKind)
	}
}

type healthStatus struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// argoLua runs a health script on obj as Argo CD does.
func argoLua(obj map[string]any, script string) (healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.OsLibName, openSafeOs}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return healthStatus{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decodeValue(l, obj))
	if err := l.DoString(script); err != nil {
		return healthStatus{}, err
	}
	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return healthStatus{}, nil
	case lua.LTTable:
	default:
		return healthStatus{}, errors.New("expect table output from Lua script, not " + ret.Type().String())
	}
	raw, err := luajson.Encode(ret)
	if err != nil {
		return healthStatus{}, err
	}
	var hs healthStatus
	if err := json.Unmarshal(raw, &hs); err != nil {
		return healthStatus{}, err
	}
	switch hs.Status {
	case "Unknown", "Progressing", "Suspended", "Healthy", "Degraded", "Missing":
		return hs, nil
	}
	return healthStatus{Status: "Unknown", Message: "Lua returned an invalid health status"}, nil
}

// openSafeOs is Argo CD's os subset: time and date only (enough for the scripts' needs; ours use
// neither).
func openSafeOs(l *lua.LState) int {
	mod := l.RegisterModule(lua.OsLibName, map[string]lua.LGFunction{
		"time": func(l *lua.LState) int { l.Push(lua.LNumber(time.Now().Unix())); return 1 },
		"date": func(l *lua.LState) int { l.Push(lua.LString(time.Now().Format(time.ANSIC))); return 1 },
	})
	l.Push(mod)
	return 1
}

// decodeValue is Argo CD's conversion of an object into Lua values.
func decodeValue(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for k, item := range v {
			tbl.RawSetH(lua.LString(k), decodeValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}
