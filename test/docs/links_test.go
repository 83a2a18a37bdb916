// Package docs_test checks the repository's Markdown: every relative link names a file that
// exists and, with a #fragment, a heading that file has, so moving or renaming a section
// cannot leave a reader at a dead link.
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, from test/docs.
const root = "../.."

// link matches an inline Markdown link's target; images and reference links are not used here.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// inlineLink is a link inside a heading, whose anchor keeps only its text.
var inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)

// codeSpan is inline code, whose brackets (regular expressions in docs/api.md) are not links.
var codeSpan = regexp.MustCompile("`[^`]*`")

// heading matches an ATX heading.
var heading = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)

// markdownFiles are the files whose links are checked: README.md and docs/*.md.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	if len(files) < 2 {
		t.Fatalf("no Markdown files under %s/docs", root)
	}
	return files
}

// slug is GitHub's anchor for a heading: a link keeps its text, then lower case, every character
// that is not a letter, digit, space, hyphen or underscore dropped (backticks, asterisks and
// punctuation among them), spaces to hyphens.
func slug(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// proseLine is a line outside fenced code blocks, with its 1-based number.
type proseLine struct {
	n    int
	text string
}

// prose reads path and returns its lines outside fenced code blocks, whose headings are not
// headings and whose brackets are not links.
func prose(t *testing.T, path string) []proseLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []proseLine
	fenced := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, proseLine{i + 1, line})
		}
	}
	return out
}

// anchors are the fragments a file's headings give, with GitHub's -1, -2 suffixes for repeats.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(t, path) {
		m := heading.FindStringSubmatch(line.text)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestSlugMatchesGitHubAnchors(t *testing.T) {
	for text, want := range map[string]string{
		"Where it stands": "where-it-stands",
		"Tail() cost against log length (`BenchmarkTailRatio`, 3,000 interleaved calls per size)": "tail-cost-against-log-length-benchmarktailratio-3000-interleaved-calls-per-size",
		"Day two, later: another set of 5, run by run, and where the toggle storm's time goes":    "day-two-later-another-set-of-5-run-by-run-and-where-the-toggle-storms-time-goes",
		"Manager with Events off (`-manager-args=--events=off`)":                                  "manager-with-events-off--manager-args--eventsoff",
		"Scale and sharding": "scale-and-sharding",
	} {
		if got := slug(text); got != want {
			t.Errorf("slug(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestRelativeLinksResolve(t *testing.T) {
	cache := map[string]map[string]bool{}
	for _, file := range markdownFiles(t) {
		name, _ := filepath.Rel(root, file)
		for _, line := range prose(t, file) {
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line.text, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: no file %s: fix the path or restore the file", name, line.n, target, path)
						continue
					}
				}
				if frag == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if cache[dest] == nil {
					cache[dest] = anchors(t, dest)
				}
				if !cache[dest][frag] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s: link to a heading it has", name, line.n, target, filepath.Base(dest), frag)
				}
			}
		}
	}
}
