package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditUsage: bad flags of `podpatch audit` and `serve --audit-interval` are usage errors
// (exit 2, one line), and an unreadable kubeconfig is an error (exit 1, one line). The audit of
// a real cluster is tested end to end (test/e2e/audit_test.go).
func TestAuditUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.kubeconfig")
	requireCommandErrors(t, []commandError{
		{[]string{"audit", "-A", "-n", "team-a"}, 2, "--namespace and --all-namespaces exclude each other"},
		{[]string{"audit", "-o", "xml"}, 2, `--output "xml": want one of table, json, yaml`},
		{[]string{"audit", "--page-size", "0"}, 2, "--page-size must be at least 1"},
		{[]string{"audit", "extra"}, 2, "unexpected arguments extra"},
		{[]string{"audit", "--kubeconfig", missing, "-A"}, 1, "kubeconfig"},
		{[]string{"serve", "--audit-interval", "-1s"}, 2, "--audit-interval must not be negative"},
	})
}

// commandError is a command line that fails: its exit status and what its one line of
// standard error says.
type commandError struct {
	args []string
	code int
	want string
}

// requireCommandErrors runs each command line and checks that it fails as said, in one line
// on standard error and nothing on standard output.
func requireCommandErrors(t *testing.T, cases []commandError) {
	t.Helper()
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(c.args, strings.NewReader(""), &stdout, &stderr)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: one line: %q", c.args, stderr.String())
		require.Empty(t, stdout.String())
	}
}
