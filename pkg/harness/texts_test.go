package harness

import "testing"

func TestExactTexts(t *testing.T) {
	pins := map[string]string{
		NoticePlanOn:         "The user switched this session to plan mode.",
		NoticeDefault:        "The user switched this session back to the default mode.",
		ExitApprovedText:     "Plan approved — plan mode exited; carry out the plan starting with your next step.",
		ExitErrDismissed:     "The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message.",
		KeepPlanningText(""): "The user chose to keep planning; revise the plan and present it again.",
		KeepPlanningText("consider the resume path"): "The user chose to keep planning; their feedback: consider the resume path",
	}
	for got, want := range pins {
		if got != want {
			t.Errorf("%q != %q", got, want)
		}
	}
}
