package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/harness-dev/planmode-operator/internal/storeenv"
)

// Every binary reads the store from PLANMODE_LOG_STORE; the names older releases read still
// work but are deprecated, so the docs, help texts and comments name them only where they say
// so: a paragraph of Markdown, or a line elsewhere, that names one also says "deprecated".
func TestDeprecatedStoreVariablesOnlyWhereTheDeprecationIsExplained(t *testing.T) {
	skipDirs := map[string]bool{".git": true, "bin": true, ".planmode": true, "node_modules": true,
		filepath.Join("docs", "results"): true, filepath.Join("internal", "storeenv"): true}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skipDirs[rel] {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		ext := filepath.Ext(name)
		scanned := ext == ".go" || ext == ".md" || ext == ".yaml" || ext == ".yml" || ext == ".sh" || ext == ".ts" || name == "Makefile" || name == "Dockerfile"
		if !scanned || strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, ".test.ts") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		sep := "\n"
		if ext == ".md" {
			sep = "\n\n"
		}
		for _, block := range strings.Split(string(data), sep) {
			for _, old := range storeenv.Deprecated {
				if strings.Contains(block, old) && !strings.Contains(strings.ToLower(block), "deprecat") {
					t.Errorf("%s names %s without saying it is deprecated; use %s:\n%s", rel, old, storeenv.Name, strings.TrimSpace(block))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files under %s", checked, root)
	}
}
