package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// demoMessage is the first message the banner suggests sending.
const demoMessage = "propose the next change"

// printNextSteps prints where everything is and the commands to try, for the agent that runs:
// both demo agents answer a message (the reference agent after its short first turn, the
// harness from the start), and with no agent a selection is all there is to try.
func printNextSteps(out io.Writer, o options, kubeconfig string, p paths, took time.Duration) {
	agentLog := filepath.Join(p.dir, "agent.log")
	if o.noAgent {
		agentLog = "none (--no-agent)"
	}
	fmt.Fprintf(out, `
planmode-operator is running (up in %s).
  kubeconfig:           %s
  session log (SQLite): %s
  manager log:          %s
  agent log:            %s
  state kept in:        %s (delete it to start over)

%s In another terminal:

  %s
%s
Ctrl-C stops everything.
`, took.Round(100*time.Millisecond), kubeconfig, p.store, filepath.Join(p.dir, "manager.log"), agentLog, p.dir,
		agentSentence(o), exportLine(kubeconfig, p.binDir, o.assets), commands(o))
}

func agentSentence(o options) string {
	switch {
	case o.noAgent:
		return "No demo agent runs (--no-agent): a selection is committed to the log at once, and no one answers a message."
	case o.agent == agentDsh:
		return "The demo agent is the DeepSeek harness (dsh) with agents/dsh-plugin" + dshModel() + "; it waits for a message."
	}
	return "The demo agent (the reference agent) runs a short first turn, then waits for a message."
}

func dshModel() string {
	if os.Getenv("DEEPSEEK_API_KEY") != "" {
		return ", on the model DEEPSEEK_API_KEY opens"
	}
	return ", on a scripted local model"
}

// exportLine sets KUBECONFIG, and PATH to the folders of kubectl-plan and of kubectl (the one
// make envtest-assets built, beside the control plane's binaries).
func exportLine(kubeconfig, binDir, assets string) string {
	path := []string{binDir}
	if assets != "" {
		if abs, err := filepath.Abs(assets); err == nil {
			if _, err := os.Stat(filepath.Join(abs, "kubectl")); err == nil {
				path = append(path, abs)
			}
		}
	}
	return fmt.Sprintf("export KUBECONFIG=%s PATH=%s:$PATH", kubeconfig, strings.Join(path, ":"))
}

// commands are the banner's kubectl lines for the session, one flow: with an agent, a message
// that enters plan mode and starts a turn, the log as it runs, the plan it presents, the
// decision.
func commands(o options) string {
	s := o.session
	if o.namespace != "default" {
		s += " -n " + o.namespace
	}
	var lines [][2]string
	if o.noAgent {
		lines = [][2]string{
			{"kubectl plan list", ""},
			{"kubectl plan on " + s, "committed at once: no turn is open"},
			{"kubectl plan status " + s, ""},
			{"kubectl plan off " + s, ""},
		}
	} else {
		lines = [][2]string{
			{"kubectl plan list", ""},
			{fmt.Sprintf("kubectl plan message %s %q", s, demoMessage), "plan mode on, and a turn for the message"},
			{"kubectl plan log " + s + " -f", "the turn as it runs (Ctrl-C stops following)"},
			{"kubectl plan review " + s + " --wait", "the plan, once the agent presents it"},
			{"kubectl plan review " + s + " --web", "the same review in a browser (prints a local URL)"},
			{"kubectl plan approve " + s, `or: kubectl plan revise ` + s + ` "FEEDBACK"`},
			{"kubectl plan status " + s, ""},
		}
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	var b strings.Builder
	for _, l := range lines {
		if l[1] == "" {
			fmt.Fprintf(&b, "  %s\n", l[0])
			continue
		}
		fmt.Fprintf(&b, "  %-*s   # %s\n", width, l[0], l[1])
	}
	return b.String()
}
