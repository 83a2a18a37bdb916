package docs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// roleName matches the RBAC role names the docs tell people to bind.
var roleName = regexp.MustCompile("`([a-z0-9-]+-role)`|--clusterrole ([a-z0-9-]+)|kind: ClusterRole, name: ([a-z0-9-]+)")

// Every role a doc names is one dist/install.yaml creates: Kubernetes accepts a binding to a
// ClusterRole that does not exist, so a wrong name in a doc fails silently for its reader.
func TestDocumentedRolesExist(t *testing.T) {
	install := read(t, "dist/install.yaml")
	created := map[string]bool{}
	for _, doc := range strings.Split(install, "\n---") {
		if !regexp.MustCompile(`(?m)^kind: (Cluster)?Role$`).MatchString(doc) {
			continue
		}
		if m := regexp.MustCompile(`(?m)^  name: (\S+)$`).FindStringSubmatch(doc); m != nil {
			created[m[1]] = true
		}
	}
	if !created["planmode-agentsession-reviewer-role"] {
		t.Fatalf("dist/install.yaml has no planmode-agentsession-reviewer-role; roles found: %v", created)
	}
	for _, f := range markdownFiles(t) {
		rel, _ := filepath.Rel(root, f)
		for _, m := range roleName.FindAllStringSubmatch(read(t, rel), -1) {
			name := m[1] + m[2] + m[3]
			if !created[name] {
				t.Errorf("%s names the role %q, which dist/install.yaml does not create", rel, name)
			}
		}
	}
}

// docs/operations.md lists every flag the manager has.
func TestOperationsListsEveryManagerFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/manager: %v\n%s", err, out)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput() // exits 0 or 2 with the usage
	flags := regexp.MustCompile(`(?m)^  (-[a-z0-9-]+)`).FindAllStringSubmatch(string(help), -1)
	if len(flags) < 20 {
		t.Fatalf("manager --help lists %d flags:\n%s", len(flags), help)
	}
	ops := read(t, "docs/operations.md")
	for _, f := range flags {
		if !strings.Contains(ops, "\n  "+f[1]+" ") && !strings.Contains(ops, "\n  "+f[1]+"\n") {
			t.Errorf("docs/operations.md does not list the manager flag %s", f[1])
		}
	}
}

// The pages a new user reads speak the user's tools and explain the harness's words: no
// insider shorthand, and the harness terms that must stay are in docs/glossary.md, which the
// page links.
func TestUserDocsExplainTheirWords(t *testing.T) {
	glossary := read(t, "docs/glossary.md")
	userDocs := []string{"README.md", "docs/kubectl-plan.md", "docs/review.md", "docs/operations.md", "docs/admission.md"}
	banned := []string{"set() decision", "§", "newest seed", "copy floor", "echo floor", "reference spec", "Use /plan off to leave"}
	glossed := map[string]*regexp.Regexp{
		"fold":  regexp.MustCompile(`\bfold(s|ed)?\b`),
		"told":  regexp.MustCompile(`\btold\b`),
		"floor": regexp.MustCompile(`\bfloor\b`),
	}
	for _, rel := range userDocs {
		text := codeSpan.ReplaceAllString(read(t, rel), "") // code names (`told` fields) are not prose
		for _, b := range banned {
			if strings.Contains(text, b) {
				t.Errorf("%s uses %q: say it in the user's words", rel, b)
			}
		}
		for word, re := range glossed {
			if !re.MatchString(text) {
				continue
			}
			if !strings.Contains(glossary, "**"+word) {
				t.Errorf("%s uses %q, which docs/glossary.md does not define", rel, word)
			}
			if !strings.Contains(text, "glossary.md") {
				t.Errorf("%s uses %q but does not link docs/glossary.md", rel, word)
			}
		}
	}
}
