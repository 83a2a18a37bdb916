// Command refagent is the reference agent: it runs scripted turns and steps through the agent
// SDK against a real control plane and session log, so tests, benchmarks and the demo can
// drive plan mode end to end.
//
//	refagent --namespace team-a --name demo --store sqlite:///var/lib/planmode/log.db --turns 3 --steps 2 --step-delay 200ms
//	refagent ... --script cmd/refagent/demo.txt --loop
//
// Script lines: turn [prompt] | step [text] | retry | tool NAME | exit PLAN | sleep DUR | end
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

func run() error {
	var (
		namespace  = flag.String("namespace", os.Getenv("AGENT_NAMESPACE"), "namespace of the AgentSession (env AGENT_NAMESPACE)")
		name       = flag.String("name", os.Getenv("AGENT_SESSION"), "name of the AgentSession (env AGENT_SESSION)")
		storeURL   = flag.String("store", "", "session log URL: sqlite:///abs/path.db or postgres://... (default $"+storeenv.Name+")")
		turns      = flag.Int("turns", 1, "turns to run when no --script is given")
		steps      = flag.Int("steps", 1, "steps per turn when no --script is given")
		scriptPath = flag.String("script", "", "script file: lines turn [prompt] | step [text] | retry | tool NAME | exit PLAN | sleep DUR | end")
		stepDelay  = flag.Duration("step-delay", 0, "model time per step, between its request and its step/end")
		loop       = flag.Bool("loop", false, "repeat the script until interrupted (demo)")
		serve      = flag.Bool("wait-for-messages", false, "after the script (without --loop), stay idle and start a turn for each user message (kubectl plan message) until interrupted")
		timeout    = flag.Duration("boundary-timeout", agentsdk.DefaultBoundaryWait,
			"the longest a step boundary waits for the manager's answer before the step proceeds under the committed state (the selection then applies at a later boundary)")
		review   = flag.Duration("review-timeout", refagent.DefaultReviewTimeout, "how long an exit_plan_mode call waits for the plan review")
		provider = flag.String("provider", "reference", "request/header config.provider")
		model    = flag.String("model", "scripted", "request/header config.model")
		quiet    = flag.Bool("quiet", false, "print only the summary")
		watchFor = flag.Duration("watch-timeout", 0, "how long each watch lasts before the agent watches again, between it and twice it: at least 5m; "+
			"0 is client-go's 5 to 10 minutes (thousands of agents: longer means fewer re-watches for the API server)")
	)
	flag.BoolFunc("version", "print the version and exit", func(string) error {
		fmt.Println(version.String("refagent"))
		os.Exit(0)
		return nil
	})
	flag.Parse()
	if *storeURL == "" {
		*storeURL, _ = storeenv.Lookup(os.Stderr)
	}
	switch {
	case *namespace == "" || *name == "":
		return fmt.Errorf("--namespace and --name must name the agent's AgentSession")
	case *storeURL == "":
		return fmt.Errorf("--store is required: the session log URL shared with the manager (sqlite:///abs/path.db or postgres://...)")
	case *turns < 1 || *steps < 1:
		return fmt.Errorf("--turns and --steps must be at least 1")
	case *watchFor != 0 && *watchFor < agentsdk.MinWatchTimeout:
		return fmt.Errorf("--watch-timeout is %s: give 0 (client-go's 5 to 10 minutes) or at least 5m", *watchFor)
	}
	script, err := loadScript(*scriptPath, *turns, *steps)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := stdr.New(nil)
	// The SDK's clients log through controller-runtime; without a logger it prints a stack trace
	// ("log.SetLogger(...) was never called") on a clean shutdown.
	ctrllog.SetLogger(log)
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	store, err := sessionlog.Open(ctx, *storeURL)
	if err != nil {
		return err
	}
	defer store.Close()
	c, err := agentsdk.New(ctx, agentsdk.Options{Config: cfg, Namespace: *namespace, Name: *name, Store: store, Logger: log, WatchTimeout: *watchFor})
	if err != nil {
		return err
	}
	defer c.Close()
	// The liveness Lease tells reviewers this agent is there (docs/protocol.md, "Agent liveness").
	lease, err := agentsdk.StartLease(ctx, cfg, *namespace, *name, log)
	if err != nil {
		return err
	}
	defer lease.Stop()

	stats, err := refagent.Run(ctx, refagent.Options{
		Client: c, Script: script, Loop: *loop, WaitForMessages: *serve, StepDelay: *stepDelay, BoundaryTimeout: *timeout, ReviewTimeout: *review,
		Model: harness.LLMCallConfig{Provider: *provider, Model: *model}, Logger: logr.Discard(),
		OnStep: func(r refagent.StepRecord) {
			if *quiet {
				return
			}
			if r.Err != nil {
				fmt.Printf("turn %d step %d: proposal failed after %s: %v\n", r.Turn, r.Step, r.Latency.Round(time.Microsecond), r.Err)
				return
			}
			fmt.Printf("turn %d step %d: plan=%v asked=%v unanswered=%v boundary=%s header=%v notice=%q\n",
				r.Turn, r.Step, r.Active, r.Asked, r.Unanswered, r.Latency.Round(time.Microsecond), r.HeaderLogged, r.Notice)
		},
	})
	fmt.Printf("session %s: %d turns, %d steps, %d asked, %d notices, %d failed proposals, %d retries, %d tool calls\n",
		c.SessionID(), stats.Turns, stats.Steps, stats.Asked, stats.Notices, stats.FailedProposals, stats.Retries, stats.ToolCalls)
	// An interrupt is how a looping demo ends, not a failure.
	interrupted := (*loop || *serve) && ctx.Err() != nil
	if err != nil && !interrupted {
		return err
	}
	return nil
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
