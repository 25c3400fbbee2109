package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLintNamespaceAgainstEnforce: `podpatch lint` of a namespace ConfigMap together with the
// platform's refuses a namespace policy that conflicts with a platform enforce policy (issue
// 38: admission would leave it out), naming both and the rule; alone, with no platform policy
// to see, the namespace ConfigMap passes.
func TestLintNamespaceAgainstEnforce(t *testing.T) {
	dir := t.TempDir()
	platform := filepath.Join(dir, "platform.yaml")
	tenant := filepath.Join(dir, "tenant.yaml")
	require.NoError(t, os.WriteFile(platform, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: podpatch-system, labels: {podpatch.io/policy: "true"}}
data:
  limits.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: memory-limit}
    spec:
      mode: enforce
      template: {spec: {containers: [{name: '*', resources: {limits: {memory: 4Gi}}}]}}
`), 0o600))
	require.NoError(t, os.WriteFile(tenant, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: big, namespace: team-a, labels: {podpatch.io/policy: "true"}}
data:
  big.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: big-requests}
    spec:
      template: {spec: {containers: [{name: '*', resources: {requests: {memory: 64Gi}}}]}}
`), 0o600))
	r := podpatch(t, "", "lint", platform, tenant)
	assert.Equal(t, 1, r.code, "%s", r.stdout)
	assert.Contains(t, r.stdout, tenant+": team-a/big: big.yaml: big-requests: spec.template: Forbidden: conflicts with the platform's enforce policy podpatch-system/limits/memory-limit on a ")
	assert.Contains(t, r.stdout, "(request-above-limit): admission leaves this policy out (reference §5)")
	requireOK(t, podpatch(t, "", "lint", tenant))
}
