package plancli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pmezard/go-difflib/difflib"

	v1alpha1 "github.com/harness-dev/planmode-operator/api/v1alpha1"
	"github.com/harness-dev/planmode-operator/internal/termtext"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/planmode"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

// The previous revisions' texts live in the session log, not in the AgentSession: each is the
// arguments of the exit_plan_mode tool call that posted it, which the agent records anyway.
// The manager keeps only each revision's digest (status.reviewHistory), and a text read from
// the log is shown only if its digest is the one recorded, so a log rewritten since shows
// nothing rather than a false history (docs/review.md, "Revisions").

// reviewDiff prints a unified diff of the previous revision's text against the plan under
// review.
func (o *Options) reviewDiff(ctx context.Context, name, storeFlag string) error {
	as, r, err := o.sessionUnderReview(ctx, name)
	if err != nil {
		return err
	}
	diff, same, err := o.revisionDiff(ctx, as, r, storeFlag)
	if err != nil {
		return err
	}
	if diff == "" {
		_, err = fmt.Fprintln(o.Streams.Out, same)
		return err
	}
	_, err = fmt.Fprint(o.Streams.Out, termtext.Text(diff))
	return err
}

// revisionDiff is the unified diff of the previous revision's text against plan r, as the
// agent wrote them (not escaped), or, when they are the same text, a sentence saying so. The
// error says why there is nothing to compare.
func (o *Options) revisionDiff(ctx context.Context, as *v1alpha1.AgentSession, r *v1alpha1.PlanReviewRequest, storeFlag string) (diff, same string, err error) {
	name := as.Name
	rs := reviewOf(as, r)
	switch {
	case rs == nil || rs.Revision == 0:
		return "", "", fmt.Errorf("the plan under review (review %s) has no revision number yet: the manager has not opened its review; try again in a moment", r.ID)
	case rs.Revision == 1:
		return "", "", fmt.Errorf("revision 1 is the session's first plan: there is no previous revision to compare it with (kubectl plan review %s shows it)", name)
	}
	prev := revisionOfHistory(as, rs.Revision-1)
	if prev == nil {
		return "", "", fmt.Errorf("revision %d is no longer recorded (status.reviewHistory keeps the last %d): there is nothing to compare revision %d with",
			rs.Revision-1, v1alpha1.MaxReviewHistory, rs.Revision)
	}
	url, err := o.storeURL(storeFlag)
	if err != nil {
		return "", "", err
	}
	if url == "" {
		return "", "", fmt.Errorf("--diff reads the previous revision's text from the session log: %w", noStoreError())
	}
	text, err := planFromLog(ctx, url, as.Spec.SessionID, prev.PlanSHA256)
	if err != nil {
		return "", "", fmt.Errorf("the text of revision %d (review %s, SHA-256 %s): %w", prev.Revision, prev.ReviewID, prev.PlanSHA256, err)
	}
	diff, err = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(withNewline(text)), B: difflib.SplitLines(withNewline(r.Plan)),
		FromFile: fmt.Sprintf("revision %d (review %s, %s)", prev.Revision, prev.ReviewID, prev.Phase),
		ToFile:   fmt.Sprintf("revision %d (review %s, under review)", rs.Revision, r.ID),
		Context:  3,
	})
	if err != nil {
		return "", "", fmt.Errorf("compare the revisions: %w", err)
	}
	return diff, fmt.Sprintf("revision %d is the same text as revision %d", rs.Revision, prev.Revision), nil
}

// planFromLog finds, in the session's log, the plan an exit_plan_mode call posted whose text has
// the digest want.
func planFromLog(ctx context.Context, url, sessionID, want string) (string, error) {
	store, err := sessionlog.OpenReadOnly(ctx, url)
	if err != nil {
		return "", fmt.Errorf("cannot open the session-log store: %w", err)
	}
	defer func() { _ = store.Close() }()
	var from int64
	for {
		evs, err := store.ReadFrom(ctx, sessionID, from, logPage)
		if errors.Is(err, sessionlog.ErrNotFound) {
			return "", fmt.Errorf("session %q has no log in this store: is it the store the manager uses?", sessionID)
		}
		if err != nil {
			return "", fmt.Errorf("read session %q from seq %d: %w", sessionID, from, err)
		}
		for _, ev := range evs {
			if plan, ok := exitPlan(ev); ok && planmode.PlanSHA256(plan) == want {
				return plan, nil
			}
		}
		if len(evs) < logPage {
			return "", fmt.Errorf("no exit_plan_mode call in session %q's log posted this text (the log may have been rewritten, or the agent records its tool calls elsewhere)", sessionID)
		}
		from = evs[len(evs)-1].Seq + 1
	}
}

// exitPlan is the plan an exit_plan_mode tool/call event carries.
func exitPlan(ev harness.Event) (string, bool) {
	if ev.Type != harness.TypeToolCall {
		return "", false
	}
	var c harness.ToolCall
	if json.Unmarshal(ev.Data, &c) != nil || c.Name != harness.ExitToolName {
		return "", false
	}
	var args struct {
		Plan *string `json:"plan"`
	}
	if json.Unmarshal([]byte(c.Arguments), &args) != nil || args.Plan == nil {
		return "", false
	}
	return *args.Plan, true
}

func withNewline(s string) string {
	if s == "" || s[len(s)-1] != '\n' {
		return s + "\n"
	}
	return s
}
