package review_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/harness-dev/planmode-operator/test/framework"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// canI is a `kubectl auth can-i` line of a doc and the answer its comment promises.
var canI = regexp.MustCompile(`(?m)^kubectl (auth can-i [^#\n]*?)\s+#\s*(yes|no)\s*$`)

// The permission checks the docs tell people to run are run here as written, with the real
// kubectl against the roles of config/rbac: a check that asks the wrong question (a subresource
// written as TYPE/NAME asks about an object of that name) would answer "no" to a reviewer.
var _ = Describe("the documented permission checks", func() {
	It("kubectl auth can-i, as the docs write it, answers yes for a bound reviewer and no for the others", func() {
		files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
		Expect(err).NotTo(HaveOccurred())
		files = append(files, filepath.Join(repoRoot, "README.md"))
		found := 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			rel, _ := filepath.Rel(repoRoot, f)
			for _, m := range canI.FindAllStringSubmatch(string(data), -1) {
				found++
				line, want := m[1], m[2]
				Expect(line).NotTo(ContainAny(`'"\$`), "%s: kubectl %s: the test runs the command as written and does no shell quoting", rel, line)
				args := strings.Fields(line)
				// The docs' example identities are this suite's, so the command runs unchanged.
				Expect(flagValue(args, "-n", "--namespace")).To(Equal(ns), "%s: kubectl %s: the suite binds its users in %s", rel, line, ns)
				Expect(flagValue(args, "--as")).To(Equal(reviewer), "%s: kubectl %s: the suite's reviewer is %s", rel, line, reviewer)
				Expect(answer(runKubectl(args...))).To(Equal(want), "%s: kubectl %s", rel, line)
				if want != "yes" {
					continue
				}
				for _, other := range []string{toggler, viewer} {
					Expect(answer(runKubectl(withFlag(args, "--as", other)...))).To(Equal("no"),
						"%s: kubectl %s, as %s (not a reviewer)", rel, line, other)
				}
			}
		}
		Expect(found).To(BeNumerically(">", 0), "no `kubectl auth can-i ... # yes` line in README.md or docs/*.md")
	})
})

// answer is can-i's yes or no (it exits 1 for no), failing on anything else.
func answer(r framework.CmdResult) string {
	GinkgoHelper()
	out := strings.TrimSpace(r.Out)
	Expect(out).To(BeElementOf("yes", "no"), "stderr: %s", r.Err)
	if out == "yes" {
		Expect(r.Code).To(BeZero(), "exit %d for %q", r.Code, out)
	} else {
		Expect(r.Code).NotTo(BeZero(), "exit %d for %q", r.Code, out)
	}
	return out
}

// ContainAny matches a string holding any of chars.
func ContainAny(chars string) OmegaMatcher {
	return WithTransform(func(s string) bool { return strings.ContainsAny(s, chars) }, BeTrue())
}

// flagValue is the value of the first of names in args (--flag value or --flag=value).
func flagValue(args []string, names ...string) string {
	for i, a := range args {
		for _, n := range names {
			if a == n && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, n+"="); ok {
				return v
			}
		}
	}
	return ""
}

// withFlag is args with the value of flag name replaced.
func withFlag(args []string, name, value string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == name && i+1 < len(out) {
			out[i+1] = value
		} else if strings.HasPrefix(a, name+"=") {
			out[i] = name + "=" + value
		}
	}
	return out
}
