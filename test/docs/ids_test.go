package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/validity"
)

// TestEveryIDDocumented: every id an operator meets as a metric label or a finding — each rule
// and reason a policy is left out for (validity.Rules, validity.Reasons), each reason an update
// is denied for (validity.UpdateReasons) and each check id (checks.IDs) — is named, in
// backquotes, in docs/metrics.md (what the label's values mean) and in the page that explains
// it (docs/validity.md for the rules and reasons, docs/checks.md for the checks): an id added
// in code without its documentation fails here.
func TestEveryIDDocumented(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	metrics, validityDoc, checksDoc := read("metrics.md"), read("validity.md"), read("checks.md")
	named := func(doc, id string) bool {
		return regexp.MustCompile("`" + regexp.QuoteMeta(id) + "`").MatchString(doc)
	}
	rules := slices.Concat(validity.Rules, validity.Reasons, validity.UpdateReasons)
	for _, id := range rules {
		if !named(metrics, id) {
			t.Errorf("docs/metrics.md does not name the reason `%s` (validity's ids.go)", id)
		}
		if !named(validityDoc, id) {
			t.Errorf("docs/validity.md does not name `%s` (validity's ids.go)", id)
		}
	}
	for _, id := range checks.IDs {
		if id != checks.Unschedulable && !named(metrics, id) {
			t.Errorf("docs/metrics.md does not name the check `%s` (checks.IDs), a value of podpatch_check_findings_total", id)
		}
		if !named(checksDoc, id) {
			t.Errorf("docs/checks.md does not name the check `%s` (checks.IDs)", id)
		}
	}
}
