// Command kubectl_complete-plan completes the arguments of `kubectl plan` in kubectl's shell
// completion: kubectl runs the executable of that name it finds on PATH with the words typed
// after "kubectl plan" (the last one the word being completed), as for every plugin that ships
// one, and prints what it prints. It answers from kubectl-plan's own command tree: the
// subcommands, the session names of the namespace, the values of -o.
//
//	source <(kubectl completion bash)     # once per shell; kubectl-plan and this on PATH
//	kubectl plan status d<TAB>
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/harness-dev/planmode-operator/internal/plancli"
)

func main() {
	root := plancli.NewRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	root.SetArgs(append([]string{cobra.ShellCompRequestCmd}, os.Args[1:]...))
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
