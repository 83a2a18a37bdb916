package harness

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// tsTexts is the dsh plugin's copy of these texts (agents/dsh-plugin/src/texts.ts).
var tsTexts = filepath.Join("..", "..", "agents", "dsh-plugin", "src", "texts.ts")

// tsConst is one `export const NAME = "...";` line: a JSON string literal.
var tsConst = regexp.MustCompile(`^export const (\w+) = ("(?:[^"\\]|\\.)*");$`)

// TestTypeScriptTexts holds the plugin's texts to their Go twins byte for byte: a text that
// differs, a Go text the plugin lacks, or a plugin text with no Go twin fails.
func TestTypeScriptTexts(t *testing.T) {
	twins := map[string]string{
		"NoticePlanOn": NoticePlanOn, "NoticeDefault": NoticeDefault,
		"NoticeSourcePlugin": NoticeSourcePlugin, "NoticeSourceForm": NoticeSourceForm,
		"ExitToolName": ExitToolName, "ExitToolDescription": ExitToolDescription,
		"ExitParamPlanDescription": ExitParamPlanDescription, "ReviewDefaultTitle": ReviewDefaultTitle,
		"ExitApprovedText": ExitApprovedText, "ExitErrNotInPlanMode": ExitErrNotInPlanMode,
		"ExitErrNoHeading": ExitErrNoHeading, "ExitErrDismissed": ExitErrDismissed,
		"ExitErrAborted": ExitErrAborted, "ExitKeepPlanningGeneric": ExitKeepPlanningGeneric,
		"keepPlanningPrefix": keepPlanningPrefix, "ExitErrNoAgent": ExitErrNoAgent,
		"ExitErrNoChannel": ExitErrNoChannel, "ExitErrReloaded": ExitErrReloaded,
		"ExitErrReviewExpired": ExitErrReviewExpired,
		"ReplyOnCommitted":     ReplyOnCommitted, "ReplyOnDeferred": ReplyOnDeferred,
		"ReplyOffCommitted": ReplyOffCommitted, "ReplyOffDeferred": ReplyOffDeferred,
		"ReplyOffCancelled": ReplyOffCancelled, "ReplyOffAlreadyOff": ReplyOffAlreadyOff,
		"PlanOffImagesRefused": PlanOffImagesRefused, "PlanCommandDescription": PlanCommandDescription,
		"PlanCommandHint": PlanCommandHint,
	}
	f, err := os.Open(tsTexts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		m := tsConst.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[1]
		var ts string
		if err := json.Unmarshal([]byte(m[2]), &ts); err != nil {
			t.Errorf("%s:%d: %s is not a JSON string literal: %v", tsTexts, line, name, err)
			continue
		}
		seen[name] = true
		goText, ok := twins[name]
		switch {
		case !ok:
			t.Errorf("%s:%d: %s has no Go twin in pkg/harness texts.go; define it there and add it to this test", tsTexts, line, name)
		case ts != goText:
			t.Errorf("%s:%d: %s differs from its Go twin:\n  ts %q\n  go %q", tsTexts, line, name, ts, goText)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for name := range twins {
		if !seen[name] {
			t.Errorf("%s has no `export const %s = \"...\";` line (its Go twin is in pkg/harness texts.go)", tsTexts, name)
		}
	}
}
