package main

import (
	"path/filepath"
	"testing"
)

// TestExplainUsage: a missing or malformed KIND/NAME and bad flags of `podpatch explain` are
// usage errors (exit 2, one line), found before any cluster is contacted; an unreadable
// kubeconfig is an error (exit 1, one line). Explaining real objects is tested end to end
// (test/e2e/explain_test.go).
func TestExplainUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.kubeconfig")
	requireCommandErrors(t, []commandError{
		{[]string{"explain"}, 2, "want one KIND/NAME, got 0 argument(s)"},
		{[]string{"explain", "pod/a", "pod/b"}, 2, "want one KIND/NAME, got 2 argument(s)"},
		{[]string{"explain", "daskcluster"}, 2, `want KIND/NAME (pod/x, daskcluster/x, raycluster.ray.io/x, …), got "daskcluster"`},
		{[]string{"explain", "pod/a/b"}, 2, "want KIND/NAME"},
		{[]string{"explain", "pod/a", "-o", "xml"}, 2, `--output "xml": want one of table, json, yaml`},
		{[]string{"explain", "pod/a", "-A"}, 2, "unknown shorthand flag: 'A'"},
		{[]string{"explain", "--kubeconfig", missing, "pod/a"}, 1, "kubeconfig"},
	})
}
