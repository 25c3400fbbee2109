package render

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
)

func TestPathPrefixes(t *testing.T) {
	for path, want := range map[string][]string{
		"spec":                 nil,
		"metadata.labels.team": {"metadata", "metadata.labels"},
		"metadata.labels[cost.example.com/center]": {"metadata", "metadata.labels"},
		"spec.containers[worker].resources.limits": {"spec", "spec.containers", "spec.containers[worker]", "spec.containers[worker].resources"},
		"spec.containers[a.b].env[X].value":        {"spec", "spec.containers", "spec.containers[a.b]", "spec.containers[a.b].env", "spec.containers[a.b].env[X]"},
		"spec.tolerations[0][1]":                   {"spec", "spec.tolerations", "spec.tolerations[0]"},
	} {
		require.Equal(t, want, slices.Collect(pathPrefixes(path)), path)
	}
}

// TestReplaced: a field a later policy changes again, the same one, one inside it or one it lies
// inside, is marked with the last such policy; fields no later policy touches are not.
func TestReplaced(t *testing.T) {
	ns := &policies.Policy{Ref: "team-a/overrides/labels"}
	def := &policies.Policy{Ref: "podpatch-system/defaults/requests"}
	enf := &policies.Policy{Ref: "podpatch-system/cost/cost"}
	sec := &policies.Policy{Ref: "podpatch-system/security/baseline"}
	got := Replaced([]policies.Change{
		{Policy: def, Fields: []string{"spec.containers[worker].resources.requests.cpu", "spec.securityContext"}},
		{Policy: ns, Fields: []string{"metadata.labels.team", "metadata.labels.cost-center", "spec.containers[worker].resources.requests"}},
		{Policy: enf, Fields: []string{"metadata.labels.cost-center"}},
		{Policy: sec, Fields: []string{"spec.securityContext.seccompProfile"}},
	})
	require.Equal(t, map[string]*policies.Policy{"spec.containers[worker].resources.requests.cpu": ns, "spec.securityContext": sec}, got[0])
	require.Equal(t, map[string]*policies.Policy{"metadata.labels.cost-center": enf}, got[1])
	require.Nil(t, got[2])
	require.Nil(t, got[3])
}
