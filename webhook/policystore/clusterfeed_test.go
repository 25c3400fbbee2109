package policystore

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
)

// TestPolicyFeedKeepsNoText checks what the policy informer's cache keeps of a ConfigMap: no
// managed fields and no kubectl copy of the data (the transform), and no data once the store
// has compiled its version — while the store serves its policies, a new version is compiled
// from the new object, and an invalid version keeps the last good one.
func TestPolicyFeedKeepsNoText(t *testing.T) {
	const good = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p}\n" +
		"spec: {match: {managers: [dask]}, template: {metadata: {labels: {team: a}}}}\n"
	cm := func(rv, text string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team", ResourceVersion: rv,
				Labels:        map[string]string{policies.PolicyLabel: "true"},
				Annotations:   map[string]string{lastApplied: `{"data":{"p.yaml":"…"}}`, "note": "kept"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}},
			Data: map[string]string{"p.yaml": text},
		}
	}
	f := &ClusterFeed{store: NewStore(policies.DefaultOptions(), newTestMetrics(t), nil), changed: make(chan struct{}, 1)}
	f.store.MarkSynced()
	served := func() int {
		f.store.Publish()
		return f.store.Snapshot().Set.Count(policies.ScopeNamespace)
	}

	v1 := cm("1", good)
	obj, err := trimPolicyConfigMap(v1)
	require.NoError(t, err)
	require.Same(t, v1, obj)
	require.Nil(t, v1.ManagedFields)
	require.Equal(t, map[string]string{"note": "kept"}, v1.Annotations)
	f.upsert(v1)
	require.Nil(t, v1.Data, "compiled: the cache keeps no text")
	require.Equal(t, 1, served())
	f.upsert(v1) // the same version again (a relist's object is new; this one has no text)
	require.Equal(t, 1, served(), "the same version is not compiled again")

	v2 := cm("2", "not: [a policy")
	f.upsert(v2)
	require.Nil(t, v2.Data, "an invalid version is not compiled again either")
	require.Equal(t, 1, served(), "an invalid version keeps the last good one")
	require.Equal(t, map[string][]string{"team": {"p"}}, f.store.Snapshot().Invalid)

	v3 := cm("3", good)
	f.upsert(v3)
	require.Nil(t, v3.Data)
	require.Equal(t, 1, served())
	require.Empty(t, f.store.Snapshot().Invalid)

	unversioned := cm("", good) // never in a cache; a store without a version compiles each time
	f.upsert(unversioned)
	require.NotNil(t, unversioned.Data, "a ConfigMap without a resourceVersion keeps its text")
}
