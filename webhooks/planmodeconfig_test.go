package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// Direct calls see what the API server never sends (it drops a null section and keeps spec an
// object), so those paths are pinned here.
func TestValidatePlanModeConfigJSONDirect(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		want      string // err.Error(), "" for valid
	}{
		{"null section reaches a direct caller", `{"spec":{"section":null}}`, `spec.section: Invalid value: "null": ` + MsgSectionNotString},
		{"string spec", `{"spec":"You are in plan mode."}`, `spec: Invalid value: "string": ` + MsgSectionNotString},
		{"list spec", `{"spec":[{"section":"x"}]}`, `spec: Invalid value: "array": ` + MsgSectionNotString},
		{"no spec", `{"metadata":{}}`, `spec.section: Required value: ` + MsgSectionNotString},
		{"not JSON", `{"spec":`, "<object>: Invalid value: the object is not valid JSON: unexpected end of JSON input"},
		{"repeated key", `{"spec":{"section":1,"section":"x"}}`, "spec.section: Duplicate value: a JSON object must not repeat a key"},
		{"repeated nested key", `{"metadata":{"labels":{"a":"1","a":"2"}},"spec":{"section":"x"}}`, "metadata.labels.a: Duplicate value: a JSON object must not repeat a key"},
		{"case-sensitive spec", `{"spec":{"section":"x","tools":1},"Spec":{"section":"y"}}`, "spec: Forbidden: " + MsgUnknownKeys([]string{"tools"})},
		{"long blank value is not quoted", `{"spec":{"section":"` + strings.Repeat(" ", 65) + `"}}`, "spec.section: Invalid value: " + MsgSectionBlank},
		{"BOM only is blank (JS trim)", `{"spec":{"section":"\ufeff"}}`, `spec.section: Invalid value: "\ufeff": ` + MsgSectionBlank},
		{"NEL is not blank (JS trim keeps it)", `{"spec":{"section":"\u0085"}}`, ""},
		{"empty key is unknown", `{"spec":{"section":"x","":1}}`, "spec: Forbidden: PlanModeConfig has unknown key(s)  \u2014 config is { section }"},
		{"at the cap", `{"spec":{"section":"` + strings.Repeat("a", agentsv1alpha1.MaxSectionBytes) + `"}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidatePlanModeConfigJSON([]byte(tc.raw))
			got := ""
			if len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if got != tc.want {
				t.Fatalf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestMsgUnknownKeysExact(t *testing.T) {
	if got, want := MsgUnknownKeys([]string{"tools"}), "PlanModeConfig has unknown key(s) tools — config is { section }"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	if got, want := MsgUnknownKeys([]string{"zeta", "alpha", "Beta"}), "PlanModeConfig has unknown key(s) Beta, alpha, zeta \u2014 config is { section }"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

var (
	fuzzScheme  = newFuzzScheme()
	fuzzHandler = NewPlanModeConfigHandler(fuzzScheme)
	unknownRE   = regexp.MustCompile(`^PlanModeConfig has unknown key\(s\) .* — config is \{ section \}$`)
)

func newFuzzScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := agentsv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// FuzzPlanModeConfigSpec feeds arbitrary bytes as spec, both to the JSON rules and through the
// admission handler. Properties: no panic; at most one error, always one of the harness's
// messages (or ours for the size cap); the handler allows exactly what the rules accept; an
// accepted section is non-blank, within the cap, the only key, and decodes typed unchanged.
// Seed corpus: testdata/fuzz/FuzzPlanModeConfigSpec.
func FuzzPlanModeConfigSpec(f *testing.F) {
	for _, s := range []string{`{"section":"You are in plan mode."}`, `{"section":"  x  "}`, `{}`, `null`, `{"section":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, spec []byte) {
		raw := []byte(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"PlanModeConfig","metadata":{"name":"f","namespace":"ns"},"spec":` + string(spec) + `}`)
		if !json.Valid(raw) {
			if errs := ValidatePlanModeConfigJSON(raw); len(errs) != 1 {
				t.Fatalf("invalid JSON must give one error, got %v", errs)
			}
			return
		}
		errs := ValidatePlanModeConfigJSON(raw)
		if len(errs) > 1 {
			t.Fatalf("the harness reports one error at a time, got %d: %v", len(errs), errs)
		}
		if len(errs) == 1 {
			checkKnownMessage(t, errs[0])
		}
		resp := fuzzHandler.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Name: "f", Namespace: "ns", Object: runtime.RawExtension{Raw: raw},
		}})
		if resp.Allowed != (len(errs) == 0) {
			t.Fatalf("handler allowed=%v but rules gave %v (result %+v)", resp.Allowed, errs, resp.Result)
		}
		if !resp.Allowed && resp.Result.Code != http.StatusUnprocessableEntity {
			t.Fatalf("a refusal must be 422 Invalid, got %d: %s", resp.Result.Code, resp.Result.Message)
		}
		if len(errs) == 0 {
			checkAcceptedSpec(t, spec, raw)
		}
	})
}

// checkKnownMessage fails unless e is one of the harness's messages, or ours for the size cap.
func checkKnownMessage(t *testing.T, e *field.Error) {
	t.Helper()
	switch {
	case e.Detail == MsgSectionNotString, e.Detail == MsgSectionBlank, unknownRE.MatchString(e.Detail),
		e.Type == field.ErrorTypeDuplicate:
	case e.Type == field.ErrorTypeTooLong && strings.HasPrefix(e.Detail, "PlanModeConfig `section` is "):
	default:
		t.Fatalf("unexpected message %q", e.Detail)
	}
}

// checkAcceptedSpec fails unless an accepted spec's section is non-blank, within the cap, the
// only key, and decodes typed (from raw, the whole object) unchanged.
func checkAcceptedSpec(t *testing.T, spec, raw []byte) {
	t.Helper()
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(spec, &keys); err != nil || len(keys) != 1 {
		t.Fatalf("accepted spec must be an object with one key: %s (%v)", spec, err)
	}
	var section string
	if err := json.Unmarshal(keys["section"], &section); err != nil {
		t.Fatalf("accepted section must be a string: %v", err)
	}
	if isBlank(section) || len(section) > agentsv1alpha1.MaxSectionBytes {
		t.Fatalf("accepted a blank or oversize section (%d bytes)", len(section))
	}
	var typed agentsv1alpha1.PlanModeConfig
	if err := json.Unmarshal(raw, &typed); err != nil || typed.Spec.Section != section {
		t.Fatalf("typed decode changed the section: %v", err)
	}
	if utf8.ValidString(section) && strings.TrimSpace(section) == "" && !strings.ContainsRune(section, '\u0085') {
		t.Fatalf("accepted a section Go also considers blank: %q", section)
	}
}

// An update that leaves a stored spec unchanged is not re-judged (ratcheting), so an object
// stored before a rule existed can still be relabelled or released from its finalizers.
func TestPlanModeConfigUpdateRatchets(t *testing.T) {
	obj := func(spec, labels string) []byte {
		return []byte(`{"apiVersion":"agents.harness.dev/v1alpha1","kind":"PlanModeConfig","metadata":{"name":"c","namespace":"ns","labels":` +
			labels + `,"finalizers":[]},"spec":` + spec + `}`)
	}
	update := func(oldRaw, newRaw []byte) admission.Response {
		return fuzzHandler.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "c", Namespace: "ns",
			Object: runtime.RawExtension{Raw: newRaw}, OldObject: runtime.RawExtension{Raw: oldRaw}}})
	}
	legacy := `{"section":"Plan first.","tools":["read"]}`
	if r := update(obj(legacy, `{}`), obj(legacy, `{"team":"a"}`)); !r.Allowed {
		t.Fatalf("metadata-only update of a legacy spec refused: %v", r.Result)
	}
	r := update(obj(legacy, `{}`), obj(`{"section":"Plan first.","tools":["write"]}`, `{}`))
	if r.Allowed || r.Result.Message != `PlanModeConfig.agents.harness.dev "c" is invalid: spec: Forbidden: `+MsgUnknownKeys([]string{"tools"}) {
		t.Fatalf("a changed bad spec must be refused: %+v", r.Result)
	}
	if r := update(obj(`{"section":"Plan first."}`, `{}`), obj(`{"section":"  "}`, `{}`)); r.Allowed {
		t.Fatal("a good spec turned blank must be refused")
	}
}
