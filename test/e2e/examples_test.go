package e2e

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
)

// examplePolicyCount is how many policies manifests/examples holds, as podpatch_policies
// counts them once podpatch serves them all, so adding an example changes no test.
func examplePolicyCount(t *testing.T) float64 {
	t.Helper()
	cms, err := policies.ReadConfigMapFiles([]string{filepath.Join(repoRoot, "manifests", "examples")}, "default", nil)
	require.NoError(t, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs, "%s", policies.ProblemLines(probs))
	return float64(set.Count(policies.ScopePlatform) + set.Count(policies.ScopeNamespace))
}
