package policies

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

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
