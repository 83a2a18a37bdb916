package harness_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// TestHarnessTexts holds pkg/harness's copies of the harness's own texts to the installed
// release's sources, byte for byte: each must occur, as written, in the package that defines it.
// (The dsh plugin's copies are tied to pkg/harness by its TestTypeScriptTexts.)
func TestHarnessTexts(t *testing.T) {
	dir := filepath.Join(harnessInstall(t), "node_modules", "@deepseek-ai")
	source := func(pkg string) string {
		b, err := os.ReadFile(filepath.Join(dir, pkg, "lib", "index.js"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	planMode, questions, tools := source("dsh-plan-mode"), source("dsh-user-questions"), source("dsh-tools")
	for _, c := range []struct {
		name, text, in, pkg string
	}{
		{"NoticePlanOn", harness.NoticePlanOn, planMode, "dsh-plan-mode"},
		{"NoticeDefault", harness.NoticeDefault, planMode, "dsh-plan-mode"},
		{"ExitToolName", `"` + harness.ExitToolName + `"`, planMode, "dsh-plan-mode"},
		{"ExitToolDescription", harness.ExitToolDescription, planMode, "dsh-plan-mode"},
		{"ExitParamPlanDescription", harness.ExitParamPlanDescription, planMode, "dsh-plan-mode"},
		{"ExitApprovedText", harness.ExitApprovedText, planMode, "dsh-plan-mode"},
		{"ExitErrNotInPlanMode", "is only available in plan mode", planMode, "dsh-plan-mode"},
		{"ExitErrNoHeading", "requires a non-empty markdown plan starting with a # heading", planMode, "dsh-plan-mode"},
		{"ExitErrNoAgent", "requires a calling agent (no session to switch)", planMode, "dsh-plan-mode"},
		{"ExitErrDismissed", harness.ExitErrDismissed, planMode, "dsh-plan-mode"},
		{"ExitKeepPlanningGeneric", harness.ExitKeepPlanningGeneric, planMode, "dsh-plan-mode"},
		{"KeepPlanningText", harness.KeepPlanningText("${feedback}"), planMode, "dsh-plan-mode"},
		{"ExitErrNoChannel", harness.ExitErrNoChannel, planMode, "dsh-plan-mode"},
		{"ExitErrReloaded", harness.ExitErrReloaded, planMode, "dsh-plan-mode"},
		{"ReviewDefaultTitle", `?? "` + harness.ReviewDefaultTitle + `"`, planMode, "dsh-plan-mode"},
		{"ReplyOnCommitted", harness.ReplyOnCommitted, planMode, "dsh-plan-mode"},
		{"ReplyOnDeferred", harness.ReplyOnDeferred, planMode, "dsh-plan-mode"},
		{"ReplyOffCommitted", harness.ReplyOffCommitted, planMode, "dsh-plan-mode"},
		{"ReplyOffDeferred", harness.ReplyOffDeferred, planMode, "dsh-plan-mode"},
		{"ReplyOffCancelled", harness.ReplyOffCancelled, planMode, "dsh-plan-mode"},
		{"ReplyOffAlreadyOff", harness.ReplyOffAlreadyOff, planMode, "dsh-plan-mode"},
		{"PlanOffImagesRefused", harness.PlanOffImagesRefused, planMode, "dsh-plan-mode"},
		{"PlanCommandDescription", `"` + harness.PlanCommandDescription + `"`, planMode, "dsh-plan-mode"},
		{"PlanCommandHint", `"` + harness.PlanCommandHint + `"`, planMode, "dsh-plan-mode"},
		{"NoticeSourcePlugin", `plugin: "` + harness.NoticeSourcePlugin + `"`, planMode, "dsh-plan-mode"},
		{"NoticeSourceForm", `form: "` + harness.NoticeSourceForm + `"`, planMode, "dsh-plan-mode"},
		{"ExitErrDelegatedCaller", harness.ExitErrDelegatedCaller, questions, "dsh-user-questions"},
		{"ExitErrAborted", harness.ExitErrAborted, questions, "dsh-user-questions"},
		{"UnknownToolText", "`unknown tool \"${toolName}\"`", tools, "dsh-tools"},
		{"the tool error's rendering", "text: `Error: ${message}`", tools, "dsh-tools"},
	} {
		if !strings.Contains(c.in, c.text) {
			t.Errorf("%s: %q is not in the harness's %s", c.name, c.text, c.pkg)
		}
	}
	// The harness's unknown-tool text for the exit tool, as pkg/harness builds it.
	if got, want := harness.UnknownToolText(harness.ExitToolName), `unknown tool "exit_plan_mode"`; got != want {
		t.Errorf("UnknownToolText = %q, want %q", got, want)
	}
}
