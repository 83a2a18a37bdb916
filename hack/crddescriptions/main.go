// Command crddescriptions rewrites the descriptions controller-gen copied from Go doc comments
// into the CRDs so that `kubectl explain` can wrap them to the reader's terminal: the line
// breaks of a comment's paragraph are joined, while blank lines (paragraphs) and lines that
// start a list item or are indented (code) keep their own lines.
//
//	go run ./hack/crddescriptions config/crd/bases/*.yaml
package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crddescriptions CRD.yaml...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintf(os.Stderr, "crddescriptions: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(in, &doc); err != nil {
		return err
	}
	walk(&doc)
	var out bytes.Buffer
	if bytes.HasPrefix(in, []byte("---\n")) {
		out.WriteString("---\n")
	}
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

func walk(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "description" && v.Kind == yaml.ScalarNode {
				v.Value = Unwrap(v.Value)
				v.Style = 0
				if strings.Contains(v.Value, "\n") {
					v.Style = yaml.LiteralStyle
				}
				continue
			}
			walk(v)
		}
		return
	}
	for _, c := range n.Content {
		walk(c)
	}
}

// keepsLine: a line that starts a list item or is indented stays on its own line.
var keepsLine = regexp.MustCompile(`^(\s|[-*] |\d+[.)] )`)

// Unwrap joins the hard-wrapped lines of each paragraph of s.
func Unwrap(s string) string {
	lines := strings.Split(s, "\n")
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			prev := lines[i-1]
			if l == "" || prev == "" || keepsLine.MatchString(l) {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(l)
	}
	return b.String()
}
