package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExplainUsage: a missing or malformed KIND/NAME and bad flags of `podpatch explain` are
// usage errors (exit 2, one line), found before any cluster is contacted; an unreadable
// kubeconfig is an error (exit 1, one line). Explaining real objects is tested end to end
// (test/e2e/explain_test.go).
func TestExplainUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.kubeconfig")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"explain"}, 2, "want one KIND/NAME, got 0 argument(s)"},
		{[]string{"explain", "pod/a", "pod/b"}, 2, "want one KIND/NAME, got 2 argument(s)"},
		{[]string{"explain", "daskcluster"}, 2, `want KIND/NAME (pod/x, daskcluster/x, raycluster.ray.io/x, …), got "daskcluster"`},
		{[]string{"explain", "pod/a/b"}, 2, "want KIND/NAME"},
		{[]string{"explain", "pod/a", "-o", "xml"}, 2, `--output "xml": want one of table, json, yaml`},
		{[]string{"explain", "pod/a", "-A"}, 2, "unknown shorthand flag: 'A'"},
		{[]string{"explain", "--kubeconfig", missing, "pod/a"}, 1, "kubeconfig"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(c.args, strings.NewReader(""), &stdout, &stderr)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: one line: %q", c.args, stderr.String())
		require.Empty(t, stdout.String())
	}
}
