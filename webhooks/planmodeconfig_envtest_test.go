package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/test/framework"
)

const webhookDenied = `admission webhook "vplanmodeconfig-v1alpha1.agents.harness.dev" denied the request: `

// badConfig is one row of the bad-input table: a spec (as JSON; "" means no spec at all) and the
// one field error the API server must return, in the exact form kubectl prints it.
type badConfig struct {
	spec      string
	field     string // the cause's field path
	causeType metav1.CauseType
	cause     string // the cause's message: "<type text>: <detail>"
	detail    string // the harness's own text (or ours for the size cap), verbatim
}

// pmcObject builds a PlanModeConfig as unstructured JSON so any spec shape can be sent.
func pmcObject(name, spec string) *unstructured.Unstructured {
	raw := fmt.Sprintf(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"PlanModeConfig","metadata":{"name":%q,"namespace":%q}`, name, testNS)
	if spec != "" {
		raw += `,"spec":` + spec
	}
	raw += "}"
	u := &unstructured.Unstructured{}
	Expect(u.UnmarshalJSON([]byte(raw))).To(Succeed(), raw)
	return u
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// expectRefused checks the exact status the API server returned for a refused PlanModeConfig.
func expectRefused(err error, name string, row badConfig) {
	GinkgoHelper()
	st := statusOf(err)
	Expect(st.Reason).To(Equal(metav1.StatusReasonInvalid))
	Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
	Expect(st.Message).To(Equal(webhookDenied + `PlanModeConfig.agents.harness.dev "` + name + `" is invalid: ` + row.field + ": " + row.cause))
	Expect(st.Message).To(ContainSubstring(row.detail), "the harness text must appear verbatim")
	Expect(st.Details).NotTo(BeNil())
	Expect(st.Details.Causes).To(ConsistOf(metav1.StatusCause{Type: row.causeType, Field: row.field, Message: row.cause}))
}

func expectNotStored(name string) {
	GinkgoHelper()
	err := adminC.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: name}, &agentsv1alpha1.PlanModeConfig{})
	Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a refused config must not be stored: %v", err)
}

var _ = Describe("PlanModeConfig admission", func() {
	ctx := context.Background()
	notString := func(kind string) string { return fmt.Sprintf("Invalid value: %q: %s", kind, MsgSectionNotString) }
	required := "Required value: " + MsgSectionNotString
	blank := func(v string) string { return fmt.Sprintf("Invalid value: %q: %s", v, MsgSectionBlank) }
	unknown := func(keys ...string) string { return "Forbidden: " + MsgUnknownKeys(keys) }
	big := strings.Repeat("x", agentsv1alpha1.MaxSectionBytes+1)

	DescribeTable("refuses a bad config with the harness's message, stores nothing",
		func(row badConfig) {
			name := uniqueName("bad")
			err := adminC.Create(ctx, pmcObject(name, row.spec))
			expectRefused(err, name, row)
			expectNotStored(name)
		},
		Entry("missing section", badConfig{`{}`, "spec.section", metav1.CauseTypeFieldValueRequired, required, MsgSectionNotString}),
		Entry("null section", badConfig{`{"section":null}`, "spec.section", metav1.CauseTypeFieldValueRequired, required, MsgSectionNotString}),
		Entry("integer section", badConfig{`{"section":42}`, "spec.section", metav1.CauseTypeTypeInvalid, notString("number"), MsgSectionNotString}),
		Entry("float section", badConfig{`{"section":1.5}`, "spec.section", metav1.CauseTypeTypeInvalid, notString("number"), MsgSectionNotString}),
		Entry("boolean section", badConfig{`{"section":true}`, "spec.section", metav1.CauseTypeTypeInvalid, notString("boolean"), MsgSectionNotString}),
		Entry("list section", badConfig{`{"section":["You are in plan mode."]}`, "spec.section", metav1.CauseTypeTypeInvalid, notString("array"), MsgSectionNotString}),
		Entry("object section", badConfig{`{"section":{"text":"You are in plan mode."}}`, "spec.section", metav1.CauseTypeTypeInvalid, notString("object"), MsgSectionNotString}),
		Entry("empty string", badConfig{`{"section":""}`, "spec.section", metav1.CauseTypeFieldValueInvalid, blank(""), MsgSectionBlank}),
		Entry("spaces only", badConfig{`{"section":"    "}`, "spec.section", metav1.CauseTypeFieldValueInvalid, blank("    "), MsgSectionBlank}),
		Entry("tabs and newlines only", badConfig{`{"section":"\t\n\r\n\t"}`, "spec.section", metav1.CauseTypeFieldValueInvalid, blank("\t\n\r\n\t"), MsgSectionBlank}),
		Entry("unicode whitespace only (JS trim set: NBSP, em space, ideographic space, BOM, LS)",
			badConfig{`{"section":"\u00a0\u2003\u3000\ufeff\u2028"}`, "spec.section", metav1.CauseTypeFieldValueInvalid, blank("\u00a0\u2003\u3000\ufeff\u2028"), MsgSectionBlank}),
		Entry("unknown key only, no section (section rule first)", badConfig{`{"tools":["read"]}`, "spec.section", metav1.CauseTypeFieldValueRequired, required, MsgSectionNotString}),
		Entry("unknown key with a good section", badConfig{`{"section":"Plan first.","tools":["read"]}`,
			"spec", metav1.CauseTypeForbidden, unknown("tools"), MsgUnknownKeys([]string{"tools"})}),
		Entry("several unknown keys, sorted", badConfig{`{"zeta":1,"section":"Plan first.","alpha":"a","modes":{}}`,
			"spec", metav1.CauseTypeForbidden, unknown("alpha", "modes", "zeta"), "PlanModeConfig has unknown key(s) alpha, modes, zeta \u2014 config is { section }"}),
		Entry("section plus the old nested modes.plan.section", badConfig{`{"section":"Plan first.","modes":{"plan":{"section":"old"}}}`,
			"spec", metav1.CauseTypeForbidden, unknown("modes"), MsgUnknownKeys([]string{"modes"})}),
		Entry("old nested form alone (no section)", badConfig{`{"modes":{"plan":{"section":"old"}}}`, "spec.section", metav1.CauseTypeFieldValueRequired, required, MsgSectionNotString}),
		Entry("blank section and an unknown key (blank rule first)", badConfig{`{"section":" ","tools":1}`, "spec.section", metav1.CauseTypeFieldValueInvalid, blank(" "), MsgSectionBlank}),
		Entry("number section and an unknown key (string rule first)", badConfig{`{"section":7,"tools":1}`, "spec.section", metav1.CauseTypeTypeInvalid, notString("number"), MsgSectionNotString}),
		Entry("key differing only in case", badConfig{`{"Section":"Plan first."}`, "spec.section", metav1.CauseTypeFieldValueRequired, required, MsgSectionNotString}),
		Entry("oversize section", badConfig{`{"section":` + jsonString(big) + `}`,
			"spec.section", metav1.CauseType(field.ErrorTypeTooLong), "Too long: " + MsgSectionTooLong(len(big)), MsgSectionTooLong(len(big))}),
		Entry("missing spec", badConfig{"", "spec.section", metav1.CauseTypeFieldValueRequired, required, MsgSectionNotString}),
		Entry("null spec", badConfig{"null", "spec.section", metav1.CauseTypeFieldValueRequired, required, MsgSectionNotString}),
	)

	It("leaves a non-object spec to the API server's schema, which refuses it before admission", func() {
		for _, spec := range []string{`"You are in plan mode."`, `["section"]`, `7`} {
			name := uniqueName("nonobj")
			st := statusOf(adminC.Create(ctx, pmcObject(name, spec)))
			Expect(st.Reason).To(Equal(metav1.StatusReasonInvalid))
			Expect(st.Message).To(HavePrefix(`PlanModeConfig.agents.harness.dev "` + name + `" is invalid: spec: Invalid value: `))
			Expect(st.Message).To(HaveSuffix(`: spec in body must be of type object: ` + jsonKindQuoted(spec)))
			expectNotStored(name)
		}
	})

	It("refuses an update that breaks a stored config and keeps the stored text", func() {
		name := uniqueName("upd")
		Expect(adminC.Create(ctx, pmcObject(name, `{"section":"Plan first."}`))).To(Succeed())
		u := pmcObject(name, `{"section":"Plan first.","tools":["write"]}`)
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(u.GroupVersionKind())
		Expect(adminC.Get(ctx, client.ObjectKeyFromObject(u), cur)).To(Succeed())
		u.SetResourceVersion(cur.GetResourceVersion())
		err := adminC.Update(ctx, u)
		expectRefused(err, name, badConfig{field: "spec", causeType: metav1.CauseTypeForbidden, cause: unknown("tools"), detail: MsgUnknownKeys([]string{"tools"})})
		got := &agentsv1alpha1.PlanModeConfig{}
		Expect(adminC.Get(ctx, client.ObjectKey{Namespace: testNS, Name: name}, got)).To(Succeed())
		Expect(got.Spec.Section).To(Equal("Plan first."))
		Expect(got.ResourceVersion).To(Equal(cur.GetResourceVersion()))
	})

	DescribeTable("stores a good section byte for byte",
		func(section string) {
			name := uniqueName("good")
			Expect(adminC.Create(ctx, pmcObject(name, `{"section":`+jsonString(section)+`}`))).To(Succeed())
			got := &agentsv1alpha1.PlanModeConfig{}
			Expect(adminC.Get(ctx, client.ObjectKey{Namespace: testNS, Name: name}, got)).To(Succeed())
			Expect([]byte(got.Spec.Section)).To(Equal([]byte(section)))
			// And as raw JSON from the API server, not only through the typed decode.
			cs := kubernetes.NewForConfigOrDie(cfg)
			raw, err := cs.RESTClient().Get().AbsPath("/apis/agents.harness.dev/v1alpha1/namespaces", testNS, "planmodeconfigs", name).DoRaw(ctx)
			Expect(err).NotTo(HaveOccurred())
			var obj struct {
				Spec map[string]json.RawMessage `json:"spec"`
			}
			Expect(json.Unmarshal(raw, &obj)).To(Succeed())
			Expect(obj.Spec).To(HaveLen(1))
			var stored string
			Expect(json.Unmarshal(obj.Spec["section"], &stored)).To(Succeed())
			Expect(stored).To(Equal(section))
		},
		Entry("plain", "You are in plan mode. Stay in plan mode until exit_plan_mode succeeds or the user switches the session mode."),
		Entry("leading and trailing whitespace kept", "  \n\tYou are in plan mode.\n\n  \t"),
		Entry("multi-line markdown", "# Plan mode\n\n- read, don't write\n- present a plan with `exit_plan_mode`\r\n\n```sh\nls -la\n```\n"),
		Entry("unicode", "計画モード: 先に計画を立てる 🧭 — ñ, é, ß, Ω, עברית, \u0301combining, \u200bzero-width"),
		Entry("JSON and HTML specials", `quotes " and \ backslash, <tags> & ampersands, \u0000-looking text, {"section":"x"}`),
		Entry("NEL is not whitespace to the harness's String.prototype.trim", "\u0085"),
		Entry("exactly the size cap", strings.Repeat("é", agentsv1alpha1.MaxSectionBytes/2)),
	)

	It("refuses unknown keys sent as raw JSON by a client that asks for no field validation", func() {
		name := uniqueName("raw")
		body := fmt.Sprintf(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"PlanModeConfig","metadata":{"name":%q},"spec":{"section":"Plan first.","tools":["bash"],"budget":3}}`, name)
		cs := kubernetes.NewForConfigOrDie(cfg)
		res := cs.RESTClient().Post().AbsPath("/apis/agents.harness.dev/v1alpha1/namespaces", testNS, "planmodeconfigs").
			Param("fieldValidation", "Ignore").SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx)
		var code int
		res.StatusCode(&code)
		Expect(code).To(Equal(http.StatusUnprocessableEntity))
		expectRefused(res.Error(), name, badConfig{field: "spec", causeType: metav1.CauseTypeForbidden,
			cause: unknown("budget", "tools"), detail: "PlanModeConfig has unknown key(s) budget, tools \u2014 config is { section }"})
		expectNotStored(name)

		// The same with a non-string section: the raw value reaches the webhook, not a decode error.
		body = fmt.Sprintf(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"PlanModeConfig","metadata":{"name":%q},"spec":{"section":12}}`, name)
		err := cs.RESTClient().Post().AbsPath("/apis/agents.harness.dev/v1alpha1/namespaces", testNS, "planmodeconfigs").
			Param("fieldValidation", "Ignore").SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(ctx).Error()
		expectRefused(err, name, badConfig{field: "spec.section", causeType: metav1.CauseTypeTypeInvalid, cause: notString("number"), detail: MsgSectionNotString})
		expectNotStored(name)
	})

	It("refuses through the real kubectl with the harness's text in what it prints, and applies a good config verbatim", func() {
		kubectl, err := framework.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		bad := filepath.Join(dir, "bad.yaml")
		Expect(os.WriteFile(bad, []byte(`apiVersion: agents.harness.dev/v1alpha1
kind: PlanModeConfig
metadata:
  name: kubectl-bad
  namespace: `+testNS+`
spec:
  section: You are in plan mode.
  tools: [read, grep]
`), 0o600)).To(Succeed())
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "-f", bad).CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		// kubectl rebuilds an Invalid status from its causes ("The <Kind> <name> is invalid: ...").
		Expect(string(out)).To(ContainSubstring(`The PlanModeConfig "kubectl-bad" is invalid: ` +
			`spec: Forbidden: PlanModeConfig has unknown key(s) tools — config is { section }`))
		out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "create", "-f", bad).CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		Expect(string(out)).To(ContainSubstring("PlanModeConfig has unknown key(s) tools — config is { section }"))
		expectNotStored("kubectl-bad")

		good := filepath.Join(dir, "good.yaml")
		section := "  You are in plan mode.\n\tRead before you write.\n計画 🧭\n\n"
		Expect(os.WriteFile(good, []byte(`apiVersion: agents.harness.dev/v1alpha1
kind: PlanModeConfig
metadata:
  name: kubectl-good
  namespace: `+testNS+`
spec:
  section: `+jsonString(section)+`
`), 0o600)).To(Succeed())
		out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-f", good).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		out, err = exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "-n", testNS, "planmodeconfig", "kubectl-good", "-o", "jsonpath={.spec.section}").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(Equal(section))
	})
})

func jsonKindQuoted(v string) string {
	k := jsonKind([]byte(v))
	if k == "number" {
		k = "integer"
	}
	return fmt.Sprintf("%q", k)
}
