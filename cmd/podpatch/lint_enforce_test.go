package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLintNamespaceAgainstEnforce: `podpatch lint` of a namespace ConfigMap together with the
// platform's refuses a namespace policy that conflicts with a platform enforce policy
// (admission would leave it out), naming both and the rule; alone, with no platform policy to
// see, the namespace ConfigMap passes.
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

// TestLintEnforceWarnings: `podpatch lint` warns, without failing, about an enforce policy that
// containers escape — the security baseline manifests/examples shipped before it set its fields
// in every container: a Pod-level seccomp profile a container's own overrides, and a "*" entry of
// containers that native sidecars (init containers) escape — each line with its file, rule id
// and fix; the baseline as shipped is clean.
func TestLintEnforceWarnings(t *testing.T) {
	old := filepath.Join(t.TempDir(), "security-baseline.yaml")
	require.NoError(t, os.WriteFile(old, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: security-baseline, namespace: podpatch-system, labels: {podpatch.io/policy: "true"}}
data:
  security-baseline.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: security-baseline}
    spec:
      mode: enforce
      template:
        spec:
          securityContext:
            seccompProfile: {type: RuntimeDefault}
          containers:
            - name: "*"
              securityContext:
                allowPrivilegeEscalation: false
`), 0o600))
	at := old + ": podpatch-system/security-baseline: security-baseline.yaml: security-baseline: "
	out := requireOK(t, podpatch(t, "", "lint", old))
	assert.Equal(t, []string{
		"1 ConfigMap(s), 1 platform and 0 namespace policies: ok",
		at + `spec.template.spec.securityContext.seccompProfile: warning enforce-pod-field-overridable: a container's own securityContext.seccompProfile overrides the Pod's: containers (and the ephemeral containers kubectl debug adds) and init containers (native sidecars, restartPolicy: Always, among them) that set their own escape this policy; fix: set securityContext.seccompProfile, as at the Pod level, in the "*" entry of containers and of initContainers too`,
		at + `spec.template.spec.initContainers: warning enforce-init-containers-uncovered: "*" applies to the containers of its own list only: init containers, native sidecars (restartPolicy: Always) among them, escape what the "*" entry of containers sets and no "*" entry of initContainers sets: securityContext.allowPrivilegeEscalation; fix: set the same fields in a "*" entry of initContainers`,
	}, strings.Split(strings.TrimSpace(out), "\n"))
	assert.Equal(t, "1 ConfigMap(s), 1 platform and 0 namespace policies: ok\n",
		requireOK(t, podpatch(t, "", "lint", "../../manifests/examples/security-baseline.yaml")))
}
