package plancli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The structured outputs of list and status, as kubectl names them.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "", "Output format: json or yaml (default: a table for people)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp))
}

func checkOutput(output string) error {
	if output != "" && output != outputJSON && output != outputYAML {
		return fmt.Errorf("unknown output format %q for -o: use -o json or -o yaml, or no -o for text", output)
	}
	return nil
}

// printStructured writes v as JSON (indented) or YAML.
func printStructured(out io.Writer, v any, output string) error {
	if output == outputYAML {
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode the output: %w", err)
		}
		_, err = out.Write(b)
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the output: %w", err)
	}
	_, err = fmt.Fprintln(out, string(b))
	return err
}

// rawWatchFrom asks a watch for the changes after resourceVersion (the list it follows).
func rawWatchFrom(resourceVersion string) *metav1.ListOptions {
	return &metav1.ListOptions{ResourceVersion: resourceVersion, AllowWatchBookmarks: false}
}
