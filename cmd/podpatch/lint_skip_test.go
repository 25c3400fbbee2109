package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLintSkipsOtherKinds: `podpatch lint DIR` on a directory of manifests that holds other
// objects than ConfigMaps (a kustomize base, the policies' own test objects) lints every
// ConfigMap and names each skipped document on a line of its own, instead of stopping at the
// first file that is not a ConfigMap (`lint policies/` stopped at a Pod). A document
// without apiVersion or kind is still an error.
func TestLintSkipsOtherKinds(t *testing.T) {
	dir := t.TempDir()
	policy, err := os.ReadFile(filepath.Join(examples, "cost-center.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a-deployment.yaml"), []byte(
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b-policy.yaml"), policy, 0o600))

	out := requireOK(t, podpatch(t, "", "lint", dir))
	deployment := filepath.Join(dir, "a-deployment.yaml")
	assert.Contains(t, out, deployment+": document 1: apps/v1 Deployment web: skipped: not a ConfigMap\n")
	assert.Contains(t, out, deployment+": document 2: v1 Service web: skipped: not a ConfigMap\n")
	assert.Regexp(t, regexp.MustCompile(`(?m)^[1-9]\d* ConfigMap\(s\), \d+ platform and \d+ namespace policies: ok$`), out)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "c-kindless.yaml"), []byte("metadata: {name: x}\n"), 0o600))
	r := podpatch(t, "", "lint", dir)
	assert.NotEqual(t, 0, r.code, "a document without apiVersion and kind must fail lint")
	assert.Contains(t, r.stderr, "c-kindless.yaml")
}
