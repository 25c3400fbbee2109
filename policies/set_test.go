package policies

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies/profiles"
)

// setPolicies parses n ConfigMaps of one policy each in every namespace given.
func setPolicies(t *testing.T, namespaces []string, n int) map[string][]*Policy {
	t.Helper()
	out := map[string][]*Policy{}
	for _, ns := range namespaces {
		for i := range n {
			cm := policyConfigMap(ns, map[string]string{"p.yaml": fmt.Sprintf(
				"%sspec: {template: {metadata: {labels: {n%d: %q}}}}\n", docHead, i, ns)})
			cm.Name = fmt.Sprintf("cm-%d", i)
			ps, probs := ParseConfigMap(cm, DefaultOptions())
			require.Empty(t, probs)
			out[ns] = append(out[ns], ps...)
		}
	}
	return out
}

func TestReplaceMatchesNewSet(t *testing.T) {
	byNS := setPolicies(t, []string{DefaultPlatformNamespace, "team-a", "team-b"}, 3)
	var all []*Policy
	for _, ps := range byNS {
		all = append(all, ps...)
	}
	whole := NewSet(all)

	// Built one scope at a time, in another order, the Set is the same.
	step := NewSet(nil)
	for _, ns := range []string{"team-b", DefaultPlatformNamespace, "team-a"} {
		scope := ScopeNamespace
		if ns == DefaultPlatformNamespace {
			scope = ScopePlatform
		}
		step = step.Replace(scope, ns, byNS[ns])
	}
	require.Equal(t, whole.Generation(), step.Generation())
	require.Equal(t, whole.Count(ScopePlatform), step.Count(ScopePlatform))
	require.Equal(t, whole.Count(ScopeNamespace), step.Count(ScopeNamespace))
	pod := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team-a","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"}},"spec":{"containers":[{"name":"worker","image":"x"}]}}`)
	a, err := whole.Apply(Input{Kind: profiles.KindPod, Object: pod})
	require.NoError(t, err)
	b, err := step.Apply(Input{Kind: profiles.KindPod, Object: pod})
	require.NoError(t, err)
	require.Equal(t, string(a.Object), string(b.Object))
	require.Len(t, a.Applied, 6)

	// Replacing a namespace leaves the Set it came from unchanged, and shares the others.
	smaller := step.Replace(ScopeNamespace, "team-a", byNS["team-a"][:1])
	require.Equal(t, 6, step.Count(ScopeNamespace))
	require.Equal(t, 4, smaller.Count(ScopeNamespace))
	require.NotEqual(t, step.Generation(), smaller.Generation())
	require.Same(t, step.namespaces["team-b"], smaller.namespaces["team-b"])
	require.Same(t, step.platform, smaller.platform)
	gone := smaller.Replace(ScopeNamespace, "team-a", nil)
	require.NotContains(t, gone.namespaces, "team-a")
	require.Equal(t, NewSet(append(append([]*Policy{}, byNS[DefaultPlatformNamespace]...), byNS["team-b"]...)).Generation(), gone.Generation())
	require.True(t, strings.Trim(gone.Generation(), "0123456789abcdef") == "" && len(gone.Generation()) == 16)
}
