package crd_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
)

var nsCounter int

// newNamespace gives each spec its own namespace so specs cannot see each other's objects.
func newNamespace() string {
	nsCounter++
	name := fmt.Sprintf("crd-%d", nsCounter)
	Expect(k8sClient.Create(ctx, namespaceObject(name))).To(Succeed())
	return name
}

func session(ns, name, id string) *agentsv1alpha1.AgentSession {
	return &agentsv1alpha1.AgentSession{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       agentsv1alpha1.AgentSessionSpec{SessionID: id},
	}
}

// expectInvalid asserts an Invalid API error whose message contains every fragment.
func expectInvalid(err error, fragments ...string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want an Invalid error, got %v", err)
	for _, f := range fragments {
		Expect(err.Error()).To(ContainSubstring(f))
	}
}

var _ = Describe("AgentSession", func() {
	It("round-trips spec and status through the API", func() {
		ns := newNamespace()
		s := session(ns, "s1", "sess-1")
		s.Spec.PlanMode.Active = ptr.To(true)
		s.Spec.PlanMode.ConfigRef = &agentsv1alpha1.ConfigReference{Name: "strict"}
		s.Spec.ReviewTimeout = &metav1.Duration{Duration: 90_000_000_000}
		s.Spec.SteerQueue = []agentsv1alpha1.SteerMessage{{ID: "m1", Text: "draft the migration ✓"}}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		s.Status.ObservedGeneration = 1
		s.Status.PlanMode = agentsv1alpha1.PlanModeStatus{
			Active: true, Pending: true, PendingActive: ptr.To(false),
			PendingSource: agentsv1alpha1.PendingSourceExit, Selection: ptr.To(true),
			NextSeq: 42, TurnOpen: true, ToldActive: ptr.To(true),
			Config: &agentsv1alpha1.ConfigInForce{Name: "strict", Generation: 3, SectionSHA256: strings.Repeat("a", 64)},
			Notice: &agentsv1alpha1.OwedNotice{Seq: 40, Text: "The user switched this session to plan mode."},
			LastBoundary: &agentsv1alpha1.BoundaryAck{Turn: 2, Step: 1, Seq: 41, Result: agentsv1alpha1.BoundaryAdmitted,
				Active: true, NextSeq: 42, Notice: "x", Time: metav1.Now().Rfc3339Copy()},
		}
		s.Status.Agent = &agentsv1alpha1.AgentReport{
			Boundary: &agentsv1alpha1.StepBoundary{Turn: 2, Step: 1, Seq: 41},
			Review:   &agentsv1alpha1.PlanReviewRequest{ID: "r1", Plan: "# Plan\n\n- step", Turn: 2},
		}
		s.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: agentsv1alpha1.ReasonSelectionPending, Message: "waiting for the next step boundary",
			ObservedGeneration: 1, LastTransitionTime: metav1.Now().Rfc3339Copy()}}
		want := s.Status.DeepCopy()
		Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())

		got := &agentsv1alpha1.AgentSession{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), got)).To(Succeed())
		// Compare the wire form: metav1.Time values decode in the local zone.
		Expect(json.Marshal(got.Spec)).To(MatchJSON(mustJSON(s.Spec)))
		Expect(json.Marshal(got.Status)).To(MatchJSON(mustJSON(*want)))
	})

	It("tracks the manager's status.planMode, status.review and status.conditions as one field each, the agent's status.agent field by field", func() {
		ns := newNamespace()
		s := session(ns, "atomic", "sess-atomic")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		s.Status.ObservedGeneration = 1
		s.Status.PlanMode = agentsv1alpha1.PlanModeStatus{Active: true, NextSeq: 7, Selection: ptr.To(true),
			Config:       &agentsv1alpha1.ConfigInForce{Name: "default", Generation: 1},
			LastBoundary: &agentsv1alpha1.BoundaryAck{Turn: 1, Step: 2, Seq: 6, Result: agentsv1alpha1.BoundaryAdmitted, Active: true, NextSeq: 7, Time: metav1.Now().Rfc3339Copy()}}
		s.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: agentsv1alpha1.ReviewPending}
		s.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: "Committed", Message: "plan mode is on", ObservedGeneration: 1, LastTransitionTime: metav1.Now().Rfc3339Copy()}}
		Expect(k8sClient.Status().Update(ctx, s, client.FieldOwner("planmode-manager"))).To(Succeed())
		patch := []byte(`{"status":{"agent":{"boundary":{"turn":1,"step":3,"seq":7}}}}`)
		Expect(k8sClient.Status().Patch(ctx, s, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("planmode-agent"))).To(Succeed())

		owned := map[string]map[string]any{}
		for _, mf := range s.ManagedFields {
			if mf.Subresource != "status" {
				continue
			}
			var set struct {
				Status map[string]any `json:"f:status"`
			}
			Expect(json.Unmarshal(mf.FieldsV1.GetRawBytes(), &set)).To(Succeed())
			delete(set.Status, ".")
			owned[mf.Manager] = set.Status
		}
		// Field by field, the manager's entry would list f:active, f:nextSeq, f:lastBoundary ...,
		// and k:{"type":"Ready"} with each of the condition's leaves.
		Expect(owned["planmode-manager"]).To(Equal(map[string]any{
			"f:observedGeneration": map[string]any{}, "f:planMode": map[string]any{}, "f:review": map[string]any{},
			"f:conditions": map[string]any{}}))
		// An agent may server-side apply status.agent.boundary alone (docs/protocol.md), so
		// status.agent must not be atomic: its owner holds the boundary's fields, not the struct.
		Expect(owned["planmode-agent"]).To(HaveKeyWithValue("f:agent", HaveKeyWithValue("f:boundary",
			HaveKey("f:step"))))

		// And the protocol's promise itself: a posted review survives an apply of the boundary alone.
		review := []byte(`{"status":{"agent":{"review":{"id":"r1","plan":"# Plan"}}}}`)
		Expect(k8sClient.Status().Patch(ctx, s, client.RawPatch(types.MergePatchType, review), client.FieldOwner("planmode-agent"))).To(Succeed())
		apply := []byte(fmt.Sprintf(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"AgentSession","metadata":{"namespace":%q,"name":"atomic"},`+
			`"status":{"agent":{"boundary":{"turn":1,"step":4,"seq":8}}}}`, ns))
		Expect(k8sClient.Status().Patch(ctx, s, client.RawPatch(types.ApplyPatchType, apply), client.FieldOwner("planmode-agent"), client.ForceOwnership)).To(Succeed())
		Expect(s.Status.Agent.Boundary.Step).To(BeEquivalentTo(4))
		Expect(s.Status.Agent.Review).NotTo(BeNil(), "applying status.agent.boundary alone must not drop status.agent.review")
		Expect(s.Status.Agent.Review.ID).To(Equal("r1"))
		Expect(s.Status.PlanMode.NextSeq).To(BeEquivalentTo(7), "nor touch the manager's planMode")
	})

	It("keeps spec.sessionID immutable", func() {
		ns := newNamespace()
		s := session(ns, "s1", "sess-1")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		s.Spec.SessionID = "sess-2"
		expectInvalid(k8sClient.Update(ctx, s), "spec.sessionID", "spec.sessionID is immutable")
	})

	It("keeps spec.fork immutable and refuses adding it after creation", func() {
		ns := newNamespace()
		s := session(ns, "child", "child-1")
		s.Spec.Fork = &agentsv1alpha1.ForkSource{SessionID: "parent-1"}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		s.Spec.Fork.SessionID = "parent-2"
		expectInvalid(k8sClient.Update(ctx, s), "spec.fork is immutable")

		plain := session(ns, "plain", "plain-1")
		Expect(k8sClient.Create(ctx, plain)).To(Succeed())
		plain.Spec.Fork = &agentsv1alpha1.ForkSource{SessionID: "parent-1"}
		expectInvalid(k8sClient.Update(ctx, plain), "spec.fork is immutable")
	})

	DescribeTable("refuses a malformed spec with a message naming the field",
		func(mutate func(*agentsv1alpha1.AgentSession), fragments ...string) {
			s := session(newNamespace(), "bad", "sess-1")
			mutate(s)
			expectInvalid(k8sClient.Create(ctx, s), fragments...)
		},
		Entry("empty sessionID", func(s *agentsv1alpha1.AgentSession) { s.Spec.SessionID = "" }, "spec.sessionID"),
		Entry("sessionID with a slash", func(s *agentsv1alpha1.AgentSession) { s.Spec.SessionID = "a/b" }, "spec.sessionID"),
		Entry("unknown review decision", func(s *agentsv1alpha1.AgentSession) {
			s.Spec.Review = &agentsv1alpha1.ReviewDecision{ReviewID: "r1", Decision: "Maybe"}
		}, "spec.review.decision", "Approve", "KeepPlanning", "Dismiss"),
		Entry("empty configRef name", func(s *agentsv1alpha1.AgentSession) {
			s.Spec.PlanMode.ConfigRef = &agentsv1alpha1.ConfigReference{}
		}, "spec.planMode.configRef.name"),
		Entry("negative fork seq", func(s *agentsv1alpha1.AgentSession) {
			s.Spec.Fork = &agentsv1alpha1.ForkSource{SessionID: "p", ThroughSeq: ptr.To[int64](-1)}
		}, "spec.fork.throughSeq"),
	)

	It("serves short names, categories and printer columns", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		list, err := dc.ServerResourcesForGroupVersion(agentsv1alpha1.GroupVersion.String())
		Expect(err).NotTo(HaveOccurred())
		byName := map[string]metav1.APIResource{}
		for _, r := range list.APIResources {
			byName[r.Name] = r
		}
		Expect(byName).To(HaveKey("agentsessions"))
		Expect(byName["agentsessions"].ShortNames).To(ConsistOf("as", "asess"))
		Expect(byName["agentsessions"].Categories).To(ConsistOf("planmode", "agents"))
		Expect(byName).To(HaveKey("agentsessions/status"))
		Expect(byName["planmodeconfigs"].ShortNames).To(ConsistOf("pmc"))

		// The Table form is what kubectl get prints.
		ns := newNamespace()
		s := session(ns, "tbl", "sess-tbl")
		s.Spec.PlanMode.Active = ptr.To(true)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		restCfg := *cfg
		restCfg.AcceptContentTypes = "application/json;as=Table;v=v1;g=meta.k8s.io"
		rc, err := dynamicRESTClient(&restCfg)
		Expect(err).NotTo(HaveOccurred())
		raw, err := rc.Get().AbsPath("/apis/agents.harness.dev/v1alpha1/namespaces", ns, "agentsessions").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		var table metav1.Table
		Expect(json.Unmarshal(raw, &table)).To(Succeed())
		cols := make([]string, 0, len(table.ColumnDefinitions))
		for _, c := range table.ColumnDefinitions {
			cols = append(cols, c.Name)
		}
		Expect(cols).To(Equal([]string{"Name", "Session", "Plan-Mode", "Pending", "Selected", "Review", "Ready", "Reason", "Age"}))
		Expect(table.Rows).To(HaveLen(1))
		Expect(table.Rows[0].Cells[1]).To(Equal("sess-tbl"))
		Expect(table.Rows[0].Cells[4]).To(BeTrue())
	})

	It("shows the columns through the real kubectl and documents every spec field in kubectl explain", func() {
		kubectl := kubectlPath()
		kubeconfig := writeKubeconfig()
		ns := newNamespace()
		s := session(ns, "demo", "sess-demo")
		s.Spec.PlanMode.Active = ptr.To(false)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		s.Status.PlanMode.Active = true
		s.Status.PlanMode.Pending = true
		s.Status.PlanMode.PendingActive = ptr.To(false)
		s.Status.Review = &agentsv1alpha1.ReviewStatus{ID: "r1", Phase: agentsv1alpha1.ReviewPending}
		s.Status.Conditions = []metav1.Condition{{Type: agentsv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: agentsv1alpha1.ReasonSelectionPending, Message: "m", LastTransitionTime: metav1.Now()}}
		Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())

		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "as", "-n", ns).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		header := strings.Fields(strings.SplitN(string(out), "\n", 2)[0])
		Expect(header).To(Equal([]string{"NAME", "PLAN-MODE", "PENDING", "SELECTED", "REVIEW", "READY", "AGE"}))
		Expect(string(out)).To(MatchRegexp(`demo\s+true\s+false\s+false\s+Pending\s+False\s`), "plan mode on, leaving it pending, not selected, a review pending")

		out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "explain", "agentsession.spec", "--recursive=false").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		for _, field := range []string{"sessionID", "planMode", "fork", "review", "reviewTimeout", "steer"} {
			Expect(string(out)).To(ContainSubstring(field))
		}
		out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "explain", "agentsession.spec.planMode").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("active"))
		Expect(string(out)).To(ContainSubstring("configRef"))
		Expect(string(out)).To(ContainSubstring("user's desired selection"))
		out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "explain", "planmodeconfig.spec.section").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("plan:policy"))
		// The schema leaves section untyped (the webhook words a non-string refusal), so explain's
		// type column says Object; the description says what it is.
		Expect(string(out)).To(ContainSubstring("Section (a string"))
	})
})

var _ = Describe("PlanModeConfig", func() {
	It("round-trips the section byte for byte", func() {
		ns := newNamespace()
		section := "  You are in plan mode.\n\tStay there until exit_plan_mode succeeds — 計画.\n\n"
		c := &agentsv1alpha1.PlanModeConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agentsv1alpha1.DefaultPlanModeConfigName},
			Spec:       agentsv1alpha1.PlanModeConfigSpec{Section: section},
		}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())
		got := &agentsv1alpha1.PlanModeConfig{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "default"}, got)).To(Succeed())
		Expect(got.Spec.Section).To(Equal(section))
	})

	It("does not prune unknown spec keys, so admission can refuse them", func() {
		ns := newNamespace()
		dyn, err := dynamic.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		gvr := schema.GroupVersionResource{Group: "agents.harness.dev", Version: "v1alpha1", Resource: "planmodeconfigs"}
		obj := map[string]any{
			"apiVersion": "agents.harness.dev/v1alpha1", "kind": "PlanModeConfig",
			"metadata": map[string]any{"name": "loose", "namespace": ns},
			"spec":     map[string]any{"section": "plan", "tools": []any{"read"}},
		}
		created, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, toUnstructured(obj), metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred(), "without the webhook installed the CRD alone must keep the key")
		Expect(created.Object["spec"]).To(HaveKey("tools"))
	})
})

func kubectlPath() string {
	GinkgoHelper()
	p, err := framework.Kubectl()
	Expect(err).NotTo(HaveOccurred())
	return p
}

// writeKubeconfig writes a kubeconfig for the envtest control plane.
func writeKubeconfig() string {
	GinkgoHelper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())
	return path
}
