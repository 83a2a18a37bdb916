// Command refagent is the reference agent: it runs scripted turns and steps through the agent
// SDK against a real control plane and session log, so tests, benchmarks and the demo can
// drive plan mode end to end.
//
//	refagent --namespace team-a --name demo --store sqlite:///var/lib/planmode/log.db --turns 3 --steps 2 --step-delay 200ms
//	refagent ... --script cmd/refagent/demo.txt --wait-for-messages
//
// Script lines: turn [prompt] | step [text] | retry | tool NAME | exit PLAN | present PLAN | sleep DUR | end | on-message
// (pkg/refagent.ParseScript). The protocol it follows is docs/protocol.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/harness-dev/planmode-operator/internal/storeenv"
	"github.com/harness-dev/planmode-operator/internal/version"

	"github.com/harness-dev/planmode-operator/pkg/agentsdk"
	"github.com/harness-dev/planmode-operator/pkg/harness"
	"github.com/harness-dev/planmode-operator/pkg/refagent"
	"github.com/harness-dev/planmode-operator/pkg/sessionlog"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "refagent:", err)
		os.Exit(1)
	}
}

// options are refagent's flags.
type options struct {
	namespace, name, storeURL, scriptPath, provider, model string
	turns, steps                                           int
	stepDelay, boundaryTimeout, reviewTimeout, watchFor    time.Duration
	loop, waitForMessages, quiet                           bool
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	script, err := loadScript(o.scriptPath, o.turns, o.steps)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := stdr.New(nil)
	// The SDK's clients log through controller-runtime; without a logger it prints a stack trace
	// ("log.SetLogger(...) was never called") on a clean shutdown.
	ctrllog.SetLogger(log)
	store, c, err := connect(ctx, o, log)
	if err != nil {
		return err
	}
	defer store.Close()
	defer c.Close()
	stats, err := refagent.Run(ctx, refagent.Options{
		Client: c, Script: script, Loop: o.loop, WaitForMessages: o.waitForMessages, StepDelay: o.stepDelay,
		BoundaryTimeout: o.boundaryTimeout, ReviewTimeout: o.reviewTimeout,
		Model: harness.LLMCallConfig{Provider: o.provider, Model: o.model}, Logger: logr.Discard(),
		OnStep: printStep(o.quiet),
	})
	fmt.Printf("session %s: %d turns, %d steps, %d asked, %d notices, %d failed proposals, %d retries, %d tool calls\n",
		c.SessionID(), stats.Turns, stats.Steps, stats.Asked, stats.Notices, stats.FailedProposals, stats.Retries, stats.ToolCalls)
	// An interrupt is how a looping demo ends, not a failure.
	interrupted := (o.loop || o.waitForMessages) && ctx.Err() != nil
	if err != nil && !interrupted {
		return err
	}
	return nil
}

// parseFlags reads the command line, the store from $PLANMODE_LOG_STORE when --store is not
// given, and refuses what cannot run.
func parseFlags() (options, error) {
	var o options
	flag.StringVar(&o.namespace, "namespace", os.Getenv("AGENT_NAMESPACE"), "namespace of the AgentSession (env AGENT_NAMESPACE)")
	flag.StringVar(&o.name, "name", os.Getenv("AGENT_SESSION"), "name of the AgentSession (env AGENT_SESSION)")
	flag.StringVar(&o.storeURL, "store", "", "session log URL: sqlite:///abs/path.db or postgres://... (default $"+storeenv.Name+")")
	flag.IntVar(&o.turns, "turns", 1, "turns to run when no --script is given")
	flag.IntVar(&o.steps, "steps", 1, "steps per turn when no --script is given")
	flag.StringVar(&o.scriptPath, "script", "", "script file: lines turn [prompt] | step [text] | retry | tool NAME | exit PLAN | present PLAN | sleep DUR | end | on-message")
	flag.DurationVar(&o.stepDelay, "step-delay", 0, "model time per step, between its request and its step/end")
	flag.BoolVar(&o.loop, "loop", false, "repeat the script until interrupted (demo)")
	flag.BoolVar(&o.waitForMessages, "wait-for-messages", false,
		"after the script (without --loop), stay idle and start a turn for each user message (kubectl plan message) until interrupted")
	flag.DurationVar(&o.boundaryTimeout, "boundary-timeout", agentsdk.DefaultBoundaryWait,
		"the longest a step boundary waits for the manager's answer before the step proceeds under the committed state (the selection then applies at a later boundary)")
	flag.DurationVar(&o.reviewTimeout, "review-timeout", refagent.DefaultReviewTimeout, "how long an exit_plan_mode call waits for the plan review")
	flag.StringVar(&o.provider, "provider", "reference", "request/header config.provider")
	flag.StringVar(&o.model, "model", "scripted", "request/header config.model")
	flag.BoolVar(&o.quiet, "quiet", false, "print only the summary")
	flag.DurationVar(&o.watchFor, "watch-timeout", 0, "how long each watch lasts before the agent watches again, between it and twice it: at least 5m; "+
		"0 is client-go's 5 to 10 minutes (thousands of agents: longer means fewer re-watches for the API server)")
	flag.BoolFunc("version", "print the version and exit", func(string) error {
		fmt.Println(version.String("refagent"))
		os.Exit(0)
		return nil
	})
	flag.Parse()
	if o.storeURL == "" {
		o.storeURL = storeenv.Lookup()
	}
	switch {
	case o.namespace == "" || o.name == "":
		return o, fmt.Errorf("--namespace and --name must name the agent's AgentSession")
	case o.storeURL == "":
		return o, fmt.Errorf("--store is required: the session log URL shared with the manager (sqlite:///abs/path.db or postgres://...)")
	case o.turns < 1 || o.steps < 1:
		return o, fmt.Errorf("--turns and --steps must be at least 1")
	case o.watchFor != 0 && o.watchFor < agentsdk.MinWatchTimeout:
		return o, fmt.Errorf("--watch-timeout is %s: give 0 (client-go's 5 to 10 minutes) or at least 5m", o.watchFor)
	}
	return o, nil
}

// connect opens the session log and the agent's client of its AgentSession.
func connect(ctx context.Context, o options, log logr.Logger) (sessionlog.Store, *agentsdk.Client, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	store, err := sessionlog.Open(ctx, o.storeURL)
	if err != nil {
		return nil, nil, err
	}
	c, err := agentsdk.New(ctx, agentsdk.Options{Config: cfg, Namespace: o.namespace, Name: o.name, Store: store, Logger: log, WatchTimeout: o.watchFor})
	if err != nil {
		_ = store.Close()
		return nil, nil, err
	}
	return store, c, nil
}

// printStep prints each step's outcome, unless quiet.
func printStep(quiet bool) func(refagent.StepRecord) {
	return func(r refagent.StepRecord) {
		if quiet {
			return
		}
		if r.Err != nil {
			fmt.Printf("turn %d step %d: proposal failed after %s: %v\n", r.Turn, r.Step, r.Latency.Round(time.Microsecond), r.Err)
			return
		}
		fmt.Printf("turn %d step %d: plan=%v asked=%v unanswered=%v boundary=%s header=%v notice=%q\n",
			r.Turn, r.Step, r.Active, r.Asked, r.Unanswered, r.Latency.Round(time.Microsecond), r.HeaderLogged, r.Notice)
	}
}

// loadScript reads --script, or generates turns x steps without one.
func loadScript(path string, turns, steps int) (refagent.Script, error) {
	if path == "" {
		return refagent.Generate(turns, steps), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--script: %w", err)
	}
	defer f.Close()
	script, err := refagent.ParseScript(f)
	if err != nil {
		return nil, fmt.Errorf("--script %s: %w", path, err)
	}
	return script, nil
}
