package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The banner fits the agent that runs: both demo agents are driven by a message (the harness
// waits for one from the start), with no agent a selection is all there is; its PATH holds the
// folders of kubectl-plan and of the built kubectl.
func TestBannerFitsTheAgent(t *testing.T) {
	assets := t.TempDir()
	if err := os.WriteFile(filepath.Join(assets, "kubectl"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := paths{dir: "/state", binDir: "/repo/bin", store: "sqlite:///state/sessions.db"}
	banner := func(o options) string {
		var out bytes.Buffer
		printNextSteps(&out, o, "/state/kubeconfig", p, 5*time.Second)
		return out.String()
	}
	flow := []string{
		`kubectl plan message demo "propose the next change"`,
		"kubectl plan log demo -f",
		"kubectl plan review demo --wait",
		"kubectl plan review demo --web",
		"kubectl plan approve demo",
	}
	for _, tc := range []struct {
		o          options
		says       string
		commands   []string
		notCommand string
	}{
		{options{session: "demo", namespace: "default", assets: assets, agent: refagentBinary},
			"The demo agent (the reference agent) runs a short first turn, then waits for a message.", flow, "kubectl plan on demo"},
		{options{session: "demo", namespace: "default", assets: assets, agent: agentDsh},
			"The demo agent is the DeepSeek harness (dsh) with agents/dsh-plugin, on a scripted local model; it waits for a message.", flow, "kubectl plan on demo"},
		{options{session: "demo", namespace: "default", assets: assets, noAgent: true},
			"No demo agent runs (--no-agent)", []string{"kubectl plan on demo", "kubectl plan off demo"}, "kubectl plan message"},
	} {
		t.Setenv("DEEPSEEK_API_KEY", "")
		b := banner(tc.o)
		for _, want := range append([]string{tc.says, "export KUBECONFIG=/state/kubeconfig PATH=/repo/bin:" + assets + ":$PATH"}, tc.commands...) {
			if !strings.Contains(b, want) {
				t.Errorf("agent %q (no agent %v): banner lacks %q:\n%s", tc.o.agent, tc.o.noAgent, want, b)
			}
		}
		if strings.Contains(b, tc.notCommand) {
			t.Errorf("agent %q (no agent %v): banner suggests %q:\n%s", tc.o.agent, tc.o.noAgent, tc.notCommand, b)
		}
	}
	// A namespace other than default is in every command; a folder without kubectl is not on PATH.
	b := banner(options{session: "s", namespace: "team-a", assets: t.TempDir()})
	if !strings.Contains(b, "kubectl plan review s -n team-a --wait") || !strings.Contains(b, "PATH=/repo/bin:$PATH") {
		t.Errorf("banner for team-a/s:\n%s", b)
	}
}
