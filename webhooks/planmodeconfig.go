package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unicode"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentsv1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
)

// PlanModeConfigPath is where the PlanModeConfig validator is served.
const PlanModeConfigPath = "/validate-agents-harness-dev-v1alpha1-planmodeconfig"

// The harness's own messages, byte for byte (the DeepSeek harness validates its plan-mode config
// with these). The dash is U+2014.
const (
	MsgSectionNotString = "PlanModeConfig needs a string `section`"
	MsgSectionBlank     = "PlanModeConfig needs a non-empty `section`"
	msgUnknownKeysFmt   = "PlanModeConfig has unknown key(s) %s \u2014 config is { section }"
)

// MsgUnknownKeys is the harness's unknown-key message for the given keys (sorted, ", "-joined).
func MsgUnknownKeys(keys []string) string {
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	return fmt.Sprintf(msgUnknownKeysFmt, strings.Join(sorted, ", "))
}

// MsgSectionTooLong names the field, its size and the limit.
func MsgSectionTooLong(size int) string {
	return fmt.Sprintf("PlanModeConfig `section` is %d bytes, more than the limit of %d bytes: shorten the plan guidance",
		size, agentsv1alpha1.MaxSectionBytes)
}

var (
	specPath    = field.NewPath("spec")
	sectionPath = specPath.Child("section")
	pmcGK       = agentsv1alpha1.GroupVersion.WithKind("PlanModeConfig").GroupKind()
)

// blankValueShown caps how much of a blank section an error message quotes.
const blankValueShown = 64

// ValidatePlanModeConfigJSON checks a PlanModeConfig object as JSON, the way the harness's
// resolveConfig checks its config: a string section, then a non-blank one, then no key besides
// section; the first failing rule is the only error, as in the harness. Then the size cap.
// It never panics, whatever the input.
func ValidatePlanModeConfigJSON(raw []byte) field.ErrorList {
	// Keys are matched exactly (encoding/json's struct decoding would also take "Spec").
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return field.ErrorList{{Type: field.ErrorTypeInvalid, Field: "<object>", BadValue: field.OmitValueType{},
			Detail: fmt.Sprintf("the object is not valid JSON: %v", err)}}
	}
	// The API server re-encodes objects, so it never sends a repeated key; a direct caller might,
	// and the typed decoder would then read another value than these rules did.
	if p, dup := duplicateKey(raw); dup {
		e := field.Duplicate(p, field.OmitValueType{})
		e.Detail = "a JSON object must not repeat a key"
		return field.ErrorList{e}
	}
	spec := bytes.TrimSpace(obj["spec"])
	// A missing or null spec has no section: the harness's first rule. The CRD schema keeps spec an
	// object, so a non-object spec is refused by the API server before it gets here; it is still
	// handled for direct callers (tests, fuzzing).
	if len(spec) == 0 || bytes.Equal(spec, []byte("null")) {
		return field.ErrorList{field.Required(sectionPath, MsgSectionNotString)}
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(spec, &keys); err != nil {
		return field.ErrorList{field.TypeInvalid(specPath, jsonKind(spec), MsgSectionNotString)}
	}
	return validateSpecKeys(keys)
}

// duplicateKey walks the JSON tokens and reports the path of the first key an object repeats.
func duplicateKey(raw []byte) (*field.Path, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var walk func(p *field.Path) (*field.Path, bool)
	walk = func(p *field.Path) (*field.Path, bool) {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, false
				}
				k, _ := kt.(string)
				child := p.Child(k)
				if seen[k] {
					return child, true
				}
				seen[k] = true
				if d, dup := walk(child); dup {
					return d, true
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if d, dup := walk(p.Index(i)); dup {
					return d, true
				}
			}
			_, _ = dec.Token()
		}
		return nil, false
	}
	return walk(nil)
}

func validateSpecKeys(keys map[string]json.RawMessage) field.ErrorList {
	rawSection, ok := keys["section"]
	if !ok {
		return field.ErrorList{field.Required(sectionPath, MsgSectionNotString)}
	}
	var section string
	if kind := jsonKind(rawSection); kind != "string" {
		return field.ErrorList{field.TypeInvalid(sectionPath, kind, MsgSectionNotString)}
	}
	if err := json.Unmarshal(rawSection, &section); err != nil {
		return field.ErrorList{field.TypeInvalid(sectionPath, "string", MsgSectionNotString)}
	}
	if isBlank(section) {
		return field.ErrorList{blankSectionError(section)}
	}
	var unknown []string
	for k := range keys {
		if k != "section" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return field.ErrorList{field.Forbidden(specPath, MsgUnknownKeys(unknown))}
	}
	return validateSectionSize(section)
}

// ValidateSection applies the rules a typed section can still break: blank, and the size cap.
func ValidateSection(section string) field.ErrorList {
	if isBlank(section) {
		return field.ErrorList{blankSectionError(section)}
	}
	return validateSectionSize(section)
}

func blankSectionError(section string) *field.Error {
	// Quote a short blank value (it shows the user the tabs and newlines they sent); omit a long one.
	var shown any = section
	if len(section) > blankValueShown {
		shown = field.OmitValueType{}
	}
	return field.Invalid(sectionPath, shown, MsgSectionBlank)
}

func validateSectionSize(section string) field.ErrorList {
	if len(section) > agentsv1alpha1.MaxSectionBytes {
		return field.ErrorList{{
			Type:     field.ErrorTypeTooLong,
			Field:    sectionPath.String(),
			BadValue: "<value omitted>",
			Detail:   MsgSectionTooLong(len(section)),
		}}
	}
	return nil
}

// isBlank is the harness's `section.trim() === ”`: JavaScript's String.prototype.trim strips
// WhiteSpace and LineTerminator code points, a set that differs from Go's unicode.IsSpace (JS
// strips U+FEFF and keeps U+0085; Go does the opposite), so it is spelled out here.
func isBlank(s string) bool {
	return strings.TrimFunc(s, isJSWhitespace) == ""
}

func isJSWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', '\u2028', '\u2029', '\ufeff':
		return true
	}
	return unicode.Is(unicode.Zs, r)
}

// jsonKind names the JSON type of a value the way the API server's schema errors do.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "null"
	}
	switch v[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// PlanModeConfigValidator is the typed admission.Validator for PlanModeConfig. On its own it can
// check only what survives a typed decode (a blank or oversize section); PlanModeConfigHandler
// runs the harness's JSON-level rules first.
type PlanModeConfigValidator struct{}

var _ admission.Validator[*agentsv1alpha1.PlanModeConfig] = PlanModeConfigValidator{}

// ValidateCreate implements admission.Validator.
func (PlanModeConfigValidator) ValidateCreate(_ context.Context, obj *agentsv1alpha1.PlanModeConfig) (admission.Warnings, error) {
	return nil, invalidPlanModeConfig(obj.Name, ValidateSection(obj.Spec.Section))
}

// ValidateUpdate implements admission.Validator.
func (PlanModeConfigValidator) ValidateUpdate(_ context.Context, _, obj *agentsv1alpha1.PlanModeConfig) (admission.Warnings, error) {
	return nil, invalidPlanModeConfig(obj.Name, ValidateSection(obj.Spec.Section))
}

// ValidateDelete implements admission.Validator: deleting a config is always allowed (sessions
// that reference it report ConfigMissing).
func (PlanModeConfigValidator) ValidateDelete(context.Context, *agentsv1alpha1.PlanModeConfig) (admission.Warnings, error) {
	return nil, nil
}

func invalidPlanModeConfig(name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(pmcGK, name, errs)
}

// PlanModeConfigHandler is the PlanModeConfig admission handler.
//
// Why a raw handler in front of the typed validator: admission.WithValidator decodes the object
// into the Go type before any rule runs, so `section: 5` fails as a JSON decode error
// ("cannot unmarshal number into Go struct field") and unknown keys are silently dropped by the
// decode. The harness's rules are about the JSON shape itself, so they run on req.Object.Raw
// (the schema keeps spec schemaless and preserve-unknown-fields so the API server passes such
// values through); only a config that passes them is decoded and handed to the typed validator.
type PlanModeConfigHandler struct {
	typed admission.Handler
}

// NewPlanModeConfigHandler returns the handler; scheme must know agents.harness.dev/v1alpha1.
func NewPlanModeConfigHandler(scheme *runtime.Scheme) *PlanModeConfigHandler {
	return &PlanModeConfigHandler{typed: admission.WithValidator[*agentsv1alpha1.PlanModeConfig](scheme, PlanModeConfigValidator{}).Handler}
}

// Handle implements admission.Handler.
func (h *PlanModeConfigHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Update && sameSpec(req.OldObject.Raw, req.Object.Raw) {
		// Ratcheting: an update that leaves spec as stored (labels, annotations, finalizers) is not
		// re-judged, so an object stored before a rule existed can still be relabelled or released
		// from its finalizers and deleted.
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update {
		if errs := ValidatePlanModeConfigJSON(req.Object.Raw); len(errs) > 0 {
			return denyStatus(apierrors.NewInvalid(pmcGK, requestName(req), errs))
		}
	}
	return h.typed.Handle(ctx, req)
}

// sameSpec reports whether two object JSONs carry equal spec values (compared as decoded JSON).
func sameSpec(oldRaw, newRaw []byte) bool {
	var o, n map[string]any
	if len(oldRaw) == 0 || json.Unmarshal(oldRaw, &o) != nil || json.Unmarshal(newRaw, &n) != nil {
		return false
	}
	return reflect.DeepEqual(o["spec"], n["spec"])
}

// denyStatus turns an API status error into a denial that keeps its reason, code and causes, so
// the client sees a 422 Invalid (or 403 Forbidden) naming the fields.
func denyStatus(err apierrors.APIStatus) admission.Response {
	st := err.Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}
}

// requestName is the object's name, also for a create whose name is generated later.
func requestName(req admission.Request) string {
	if req.Name != "" {
		return req.Name
	}
	var meta struct {
		Metadata struct {
			Name         string `json:"name"`
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &meta); err == nil {
		if meta.Metadata.Name != "" {
			return meta.Metadata.Name
		}
		return meta.Metadata.GenerateName
	}
	return ""
}

var _ admission.Handler = &PlanModeConfigHandler{}
