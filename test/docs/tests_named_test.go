package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// namedTest is a Go test, fuzz target or benchmark written in backquotes in the docs.
var namedTest = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)")

// declaredTest is the declaration of one in a _test.go file.
var declaredTest = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)

// TestNamedTestsExist: every test the docs name as proof (the threat model above all) exists in
// the repository, so that a renamed or deleted test cannot leave a claim without its proof.
func TestNamedTestsExist(t *testing.T) {
	declared := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range declaredTest.FindAllSubmatch(b, -1) {
			declared[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !declared["TestNamedTestsExist"] {
		t.Fatal("the walk found no tests: wrong root?")
	}
	named := 0
	for _, f := range markdownFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range namedTest.FindAllSubmatch(b, -1) {
			named++
			if name := string(m[1]); !declared[name] {
				t.Errorf("%s names %s, which no _test.go declares", f, name)
			}
		}
	}
	if named == 0 {
		t.Fatal("the docs name no tests: the pattern is wrong")
	}
}
