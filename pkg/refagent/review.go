package refagent

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
)

// OpExit calls exit_plan_mode in the current step; Arg is the plan, with "\n" standing for a
// line break (a script line holds one line). The call waits for the review: an approval lets
// the next step boundary leave plan mode, keep-planning is a failed call, and a dismissal
// concludes the turn (the rest of the turn's script lines are skipped).
const OpExit OpKind = "exit"

// exit runs exit_plan_mode through the SDK and records the call and its result in the step.
func (r *runner) exit(ctx context.Context, arg string) error {
	if !r.stepOpen {
		return nil
	}
	r.stats.ToolCalls++
	plan := strings.ReplaceAll(arg, `\n`, "\n")
	args, _ := json.Marshal(map[string]string{"plan": plan})
	timeout := r.o.ReviewTimeout
	if timeout <= 0 {
		timeout = DefaultReviewTimeout
	}
	res, err := r.c.ExitPlanMode(ctx, plan, timeout)
	var ee *agentsdk.ExitError
	if err != nil && !errors.As(err, &ee) {
		return err // the agent's own failure (store or API unreachable)
	}
	evs, err := agentsdk.ExitToolEvents(r.turn, r.step, agentsdk.NewID(), string(args), res, err)
	if err != nil {
		return err
	}
	if _, err := r.c.Append(ctx, evs...); err != nil {
		return err
	}
	if res.ConcludeTurn {
		// Dismissed: the user takes the turn back. End it now; plan mode stays on.
		if err := r.endStep(ctx); err != nil {
			return err
		}
		if err := r.c.EndTurn(ctx, r.turn, harness.TurnCompleted); err != nil {
			return err
		}
		r.turnFailed = true // skip the rest of this turn's script; its turn/end is written
	}
	return nil
}

// DefaultReviewTimeout is how long an exit_plan_mode call waits for a reviewer by default.
const DefaultReviewTimeout = time.Hour
