package harness_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/controllers"
	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/invariant"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
	"github.com/harness-dev/planmode-operator/test/framework"
	"github.com/harness-dev/planmode-operator/webhooks"
)

// operatorEnv is the operator, for real: a control plane (kube-apiserver and etcd), the
// manager's reconciler and admission webhooks, a SQLite session log, and a namespace with a PlanModeConfig whose
// section opens with the harness's plan-section marker.
type operatorEnv struct {
	k8s   client.Client
	cfg   *rest.Config
	store sessionlog.Store
	ns    string
}

func startOperator(t *testing.T) *operatorEnv {
	t.Helper()
	harnessInstall(t) // fail early, before the control plane starts
	ctx := context.Background()
	env, cfg, err := framework.Start(framework.Options{Webhooks: true})
	if err != nil {
		t.Fatalf("start the control plane (make envtest-assets): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	store := openStore(t)
	wo := &env.WebhookInstallOptions
	wopts := webhooks.DefaultOptions()
	wopts.Host, wopts.Port, wopts.CertDir = wo.LocalServingHost, wo.LocalServingPort, wo.LocalServingCertDir
	wopts.RequireAgentBinding = false // the agents run as the manager's identity here; binding has its own specs in webhooks/
	srv, err := webhooks.NewServer(wopts)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := framework.StartManager(ctx, cfg, framework.ManagerOptions{Scheme: scheme, WebhookServer: srv,
		Setup: func(mgr ctrl.Manager) error {
			if err := webhooks.SetupWithManager(mgr, wopts); err != nil {
				return err
			}
			r := &controllers.AgentSessionReconciler{Client: mgr.GetClient(), Store: store, Recorder: mgr.GetEventRecorder(controllers.FieldManager),
				MaxStoreBackoff: 500 * time.Millisecond}
			return r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mgr.Stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "oracle-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &v1alpha1.PlanModeConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: v1alpha1.DefaultPlanModeConfigName},
		Spec:       v1alpha1.PlanModeConfigSpec{Section: planSectionMarker + ". Explore and plan; do not edit files."},
	}); err != nil {
		t.Fatal(err)
	}
	return &operatorEnv{k8s: k8s, cfg: cfg, store: store, ns: ns.Name}
}

// session creates an AgentSession (with an initial selection when active is set) and connects
// an SDK client to it.
func (o *operatorEnv) session(t *testing.T, name string, active *bool) *agentsdk.Client {
	t.Helper()
	s := &v1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: name},
		Spec:       v1alpha1.AgentSessionSpec{SessionID: o.ns + "." + name, PlanMode: v1alpha1.PlanModeSpec{Active: active}},
	}
	if err := o.k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	c, err := agentsdk.New(context.Background(), agentsdk.Options{Config: o.cfg, Namespace: o.ns, Name: name, Store: o.store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	waitFor(t, c, "the manager takes the session on", func(s *v1alpha1.AgentSession) bool {
		return s.Status.PlanMode.Config != nil && s.Status.ObservedGeneration == s.Generation
	})
	return c
}

// toggle is the user's selection (kubectl plan on/off).
func (o *operatorEnv) toggle(t *testing.T, name string, active bool) {
	t.Helper()
	obj := &v1alpha1.AgentSession{ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: name}}
	patch := []byte(`{"spec":{"planMode":{"active":` + strconv.FormatBool(active) + `}}}`)
	if err := o.k8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// TestResumeReferenceAgentExport drives sessions with the reference agent through the real
// manager (real kube-apiserver and etcd), checks that every event it wrote has a shape the real
// harness wrote for the same variant in this run's live log of scenario A, exports each session
// (sessionlog.ExportJSONL, what planlog export runs) and has the real harness resume it: it
// reads the plan state the operator committed, and the next request carries the plan section
// iff plan mode is committed.
func TestResumeReferenceAgentExport(t *testing.T) {
	t.Parallel()
	op := startOperator(t)
	ctx := context.Background()
	store := op.store
	// The live plain log of scenario A from this run of the suite (TestRealHarness checks the
	// same run): its shapes per variant, and the call config its first request/header carried.
	ref, model := referenceShapes(t, scenarioLog(t, "A_idle_review_approve", plainLog))
	for _, tc := range []struct {
		name string
		// offAfter switches plan mode off between the turns (the manager commits it idle).
		offAfter bool
	}{{"stays-on", false}, {"switched-off", true}} {
		t.Run(tc.name, func(t *testing.T) {
			id := op.ns + "." + tc.name
			c := op.session(t, tc.name, ptr.To(true))
			waitFor(t, c, "the manager commits the selection", func(s *v1alpha1.AgentSession) bool {
				return !s.Status.PlanMode.Pending && s.Status.PlanMode.Selection != nil && *s.Status.PlanMode.Selection
			})
			runScript(t, c, model, "turn explore the repo\nstep\ntool read\nstep\nend\n")
			if tc.offAfter {
				op.toggle(t, tc.name, false)
				waitFor(t, c, "the manager commits plan mode off between turns", func(s *v1alpha1.AgentSession) bool {
					return s.Status.PlanMode.Selection != nil && !*s.Status.PlanMode.Selection && !s.Status.PlanMode.Pending
				})
			}
			tail, err := store.Tail(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if tail.Active == tc.offAfter {
				t.Fatalf("the log folds to active %v; the scenario wants %v", tail.Active, !tc.offAfter)
			}
			evs, err := store.ReadFrom(ctx, id, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if vs := invariant.Check(invariant.Input{Events: evs}); len(vs) > 0 {
				t.Fatalf("the reference agent's log breaks invariants: %v", vs)
			}
			checkShapesAgainst(t, evs, ref)
			checkResume(t, store, id, tail.Active)
		})
	}
}

// waitFor waits, on the SDK client's own watch, until cond holds for the AgentSession.
func waitFor(t *testing.T, c *agentsdk.Client, what string, cond func(*v1alpha1.AgentSession) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitFor(ctx, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// runScript runs script with the reference agent, its requests configured with model.
func runScript(t *testing.T, c *agentsdk.Client, model harness.LLMCallConfig, script string) {
	t.Helper()
	s, err := refagent.ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := refagent.Run(context.Background(), refagent.Options{Client: c, Script: s, BoundaryTimeout: 30 * time.Second, Model: model}); err != nil {
		t.Fatalf("reference agent: %v", err)
	}
}

// referenceShapes are the shapes, per variant, of the events in a live harness log (every
// distinct shape the harness wrote for the variant), and the call config of its first
// request/header: the reference agent runs with that config, so the request headers it
// writes carry the same config keys (maxTokens and reasoningEffort included).
func referenceShapes(t *testing.T, l *liveLog) (map[string][]shape, harness.LLMCallConfig) {
	t.Helper()
	evs := parseEvents(t, l.Raw)
	tools := toolNames(evs)
	out := map[string][]shape{}
	var model *harness.LLMCallConfig
	for _, ev := range evs {
		v := variantForShapes(ev, tools)
		s := shapeOf(ev)
		if !slices.ContainsFunc(out[v], func(o shape) bool { return len(o.diff(s)) == 0 }) {
			out[v] = append(out[v], s)
		}
		if ev.Type == harness.TypeRequestHeader && model == nil {
			var h harness.RequestHeader
			mustDecode(t, ev, &h)
			model = &h.Header.Config
		}
	}
	if model == nil || model.MaxTokens == 0 || model.ReasoningEffort == "" {
		t.Fatalf("scenario %s: the harness's first request/header has call config %+v; the comparison needs one with maxTokens and reasoningEffort", l.Scenario.Name, model)
	}
	return out, *model
}

// variantForShapes is variant with tool results grouped: the reference agent's tools are
// stand-ins, so any tool's result is compared with the harness's result of another tool.
func variantForShapes(ev harness.Event, tools map[int64]string) string {
	v := variant(ev, tools)
	if ev.Type == harness.TypeToolResult && v != ev.Type+":"+harness.ExitToolName {
		return ev.Type + ":tool"
	}
	return v
}

// legitimatelyAbsent are the paths (with everything below them) of the harness's shape of a
// variant that the reference agent does not write, and why. Everything else must be equal:
// the same keys, nesting and value kinds (docs/harness-oracle.md, "Shapes").
var legitimatelyAbsent = map[string]string{
	// A tool's private presentation payload: rc.8's tool/result carries `meta` only "if the
	// tool attaches one" (dsh-session's types), as its read tool does (the file's lines). The
	// reference agent's tools are stand-ins that read nothing and attach none.
	"tool/result:tool": "data.meta",
	// The config fields the provider adapter filled in rather than the caller proposed
	// (EpochHeader.adapterDefaults, optional in rc.8's types): the harness's DeepSeek adapter
	// supplies maxTokens and reasoningEffort. The reference agent has no provider adapter; it
	// proposes its whole config (here the same maxTokens and reasoningEffort), so nothing is
	// an adapter's default.
	"request/header:initial": "data.header.adapterDefaults",
	"request/header:change":  "data.header.adapterDefaults",
}

// without is s less path p and everything below it.
func without(s shape, p string) shape {
	out := shape{}
	for k, v := range s {
		if k != p && !strings.HasPrefix(k, p+".") && !strings.HasPrefix(k, p+"[]") {
			out[k] = v
		}
	}
	return out
}

// checkShapesAgainst requires every event the reference agent wrote to have exactly a shape
// the harness wrote for its variant (less the variant's legitimatelyAbsent path), and names
// the variants it could not compare.
func checkShapesAgainst(t *testing.T, evs []harness.Event, ref map[string][]shape) {
	t.Helper()
	tools := toolNames(evs)
	compared := map[string]int{}
	for _, ev := range evs {
		v := variantForShapes(ev, tools)
		wants, ok := ref[v]
		if !ok {
			t.Errorf("seq %d: the reference agent wrote %s, which the harness's log has no example of", ev.Seq, v)
			continue
		}
		compared[v]++
		got := shapeOf(ev)
		var d []string
		for i, want := range wants {
			if p, ok := legitimatelyAbsent[v]; ok {
				if _, there := want[p]; !there {
					t.Fatalf("the harness's %s has no %s: legitimatelyAbsent is out of date", v, p)
				}
				want = without(want, p)
			}
			if dd := want.diff(got); i == 0 || len(dd) < len(d) {
				d = dd
			}
		}
		if len(d) > 0 {
			t.Errorf("seq %d %s: the reference agent's shape differs from the harness's: %v", ev.Seq, v, d)
		}
	}
	t.Logf("reference agent shapes compared: %v", compared)
}
