package policies

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policies/profiles"
)

// TestSelectionReads: the fixed point selects again only when a selector of a candidate policy
// reads a label that changed; labels no selector reads leave the selection as it is.
func TestSelectionReads(t *testing.T) {
	platform := policyConfigMap(DefaultPlatformNamespace, map[string]string{"p.yaml": docHead +
		"spec:\n  match: {managers: [dask], selector: {matchLabels: {tier: gpu}}}\n  template: {metadata: {labels: {pool: gpu}}}\n"})
	team := policyConfigMap("team-a", map[string]string{"p.yaml": docHead +
		"spec:\n  match: {selector: {matchExpressions: [{key: spot, operator: Exists}]}}\n  template: {metadata: {labels: {team: a}}}\n"})
	var all []*Policy
	for _, cm := range []*corev1.ConfigMap{platform, team} {
		ps, probs := ParseConfigMap(cm, DefaultOptions())
		require.Empty(t, probs)
		all = append(all, ps...)
	}
	s := NewSet(all)
	dask := profiles.Identity{Manager: profiles.ManagerDask, Role: profiles.RoleWorker}
	for _, c := range []struct {
		name          string
		id            profiles.Identity
		namespace     string
		before, after labels.Set
		want          bool
	}{
		{"no label changed", dask, "team-a", labels.Set{"tier": "gpu"}, labels.Set{"tier": "gpu"}, false},
		{"a label no selector reads", dask, "team-a", labels.Set{"tier": "gpu"}, labels.Set{"tier": "gpu", "team": "a"}, false},
		{"a label the platform's selector reads, added", dask, "team-a", nil, labels.Set{"tier": "gpu"}, true},
		{"a label the platform's selector reads, changed", dask, "team-a", labels.Set{"tier": "cpu"}, labels.Set{"tier": "gpu"}, true},
		{"a label the platform's selector reads, removed", dask, "team-a", labels.Set{"tier": "gpu"}, nil, true},
		{"a label the namespace's selector reads", dask, "team-a", nil, labels.Set{"spot": ""}, true},
		{"a label another namespace's selector reads", dask, "team-b", nil, labels.Set{"spot": ""}, false},
		{"a label a policy of another manager reads", profiles.Identity{Manager: profiles.ManagerSpark, Role: profiles.RoleScheduler}, "team-b", nil, labels.Set{"tier": "gpu"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sub := &subject{id: c.id, kind: profiles.KindPod, namespace: c.namespace, labels: c.before}
			require.Equal(t, c.want, s.selectionReads(sub, c.before, c.after))
		})
	}
}

// TestYieldedDefaultFillsASwitchedSource: a default's volume source (emptyDir with a size
// limit) yields to another default's (a ConfigMap); a platform merge or enforce policy then
// switches the volume to an emptyDir of its own. A second admission fills the yielded default's
// size limit under that emptyDir, so the first does too (the layers applied once more), and in
// `render --explain` the default names the field.
func TestYieldedDefaultFillsASwitchedSource(t *testing.T) {
	pod := fixtureJSON(t, "dask-operator/worker-pod.yaml", func(obj map[string]any) { obj["metadata"].(map[string]any)["namespace"] = "default" })
	sized := enforcePolicy(t, "sized", ModeDefault, "template: {spec: {volumes: [{name: scratch, emptyDir: {sizeLimit: 1Gi}}]}}")
	opts := DefaultOptions()
	var err error
	opts.NamespaceAllowed, err = allowlist.ParseFields(nsrouteAllowed)
	require.NoError(t, err)
	tenant := nsroutePolicy(t, opts, 0, "mode: default\ntemplate: {spec: {volumes: [{name: scratch, configMap: {name: tenant}}]}}")
	require.NotNil(t, tenant)
	for _, mode := range []Mode{ModeMerge, ModeEnforce} {
		memory := enforcePolicy(t, "memory", mode, "template: {spec: {volumes: [{name: scratch, emptyDir: {medium: Memory}}]}}")
		set := NewSet([]*Policy{sized, tenant, memory})
		in := Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Explain: true}
		res, err := set.Apply(in)
		require.NoError(t, err)
		var scratch any
		for _, v := range objectOf(t, res.Object)["spec"].(map[string]any)["volumes"].([]any) {
			if v.(map[string]any)["name"] == "scratch" {
				scratch = v
			}
		}
		require.Equal(t, map[string]any{"name": "scratch", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "1Gi"}}, scratch, mode)
		require.Equal(t, sized, res.Changes[0].Policy)
		require.Contains(t, res.Changes[0].Fields, "spec.volumes[scratch].emptyDir.sizeLimit", mode)
		in.Object, in.Explain = res.Object, false
		again, err := set.Apply(in)
		require.NoError(t, err)
		require.Equal(t, string(res.Object), string(again.Object), "%s: apply twice = apply once", mode)
	}
}
