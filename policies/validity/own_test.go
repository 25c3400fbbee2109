package validity

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// TestOwn: Env.Own returns, of the violations Check finds, those a rule reports as the values'
// own, at their place by position (and the value that brings them), without those of the object
// as given; Check finds the same violations as before, whoever asks.
func TestOwn(t *testing.T) {
	pod := func(spec string) []byte {
		js, err := yaml.YAMLToJSON([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: " + spec))
		require.NoError(t, err)
		return js
	}
	given := pod("{containers: [{name: a, image: x}, {name: b, image: x, ports: [{containerPort: 1, name: p}, {containerPort: 2, name: p}]}]}")
	patched := pod(`{containers: [{name: a, image: x, resources: {requests: {nvidia.com/gpu: "1"}}, volumeMounts: [{name: v, mountPath: /v}]},
		{name: b, image: x, ports: [{containerPort: 1, name: p}, {containerPort: 2, name: p}]}]}`)
	env := &Env{}
	obj := jsontree.Expand(json.RawMessage(patched)).(map[string]any)
	all, complete := env.CheckAll(obj)
	require.True(t, complete)
	var rules []string
	for _, v := range all {
		rules = append(rules, v.Rule)
	}
	require.ElementsMatch(t, []string{RuleExtendedResourceLimit, RuleMountWithoutVolume, RuleDuplicatePortName}, rules)

	// The duplicate ports were given; the mount may find its volume in another object.
	require.Equal(t, []Own{{
		Violation: Violation{Rule: RuleExtendedResourceLimit, Field: "spec.containers[a].resources.requests[nvidia.com/gpu]",
			Message: "nvidia.com/gpu cannot be overcommitted: a request needs an equal limit"},
		At: "spec.containers[0].resources.limits[nvidia.com/gpu]",
		By: "spec.containers[0].resources.requests[nvidia.com/gpu]",
	}}, env.Own(obj, given))

	// Without the object as given, the duplicate ports are the object's own too.
	own := env.Own(obj, pod("{containers: []}"))
	require.Len(t, own, 2)
	require.Equal(t, "spec.containers[1].ports[1].name", own[1].At)
	require.Empty(t, own[1].By)
	require.Empty(t, env.Own(jsontree.Expand(json.RawMessage(given)).(map[string]any), given))
}
