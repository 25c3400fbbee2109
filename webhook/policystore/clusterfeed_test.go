package policystore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies"
)

// fakeCluster is the policy ConfigMaps the feed reads, and what it read.
type fakeCluster struct {
	cms   map[types.NamespacedName]*corev1.ConfigMap
	reads []string
	fail  bool
}

func (c *fakeCluster) read(_ context.Context, key types.NamespacedName) (*corev1.ConfigMap, error) {
	if c.fail {
		return nil, errors.New("connection refused")
	}
	c.reads = append(c.reads, key.Name)
	cm := c.cms[key]
	if cm == nil {
		return nil, nil
	}
	return cm.DeepCopy(), nil // a read is a new object, as from the API server
}

// put writes a ConfigMap of one policy at version rv and tells the feed, as its informer does.
func (c *fakeCluster) put(f *ClusterFeed, ns, name, rv string) {
	text := fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: %s}\n"+
		"spec: {match: {managers: [dask]}, template: {metadata: {labels: {team: a}}}}\n", name)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv,
		Labels:        map[string]string{policies.PolicyLabel: "true"},
		Annotations:   map[string]string{lastApplied: text, "note": "kept"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Data: map[string]string{"p.yaml": text}}
	c.cms[types.NamespacedName{Namespace: ns, Name: name}] = cm
	meta, err := trimPolicyMetadata(&metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta})
	if err != nil {
		panic(err)
	}
	f.seen(meta)
}

// TestPolicyFeedReadsOnlyWhatServes: the feed reads a policy ConfigMap's data only for a
// version it has not compiled, and, in a namespace, only the ConfigMaps that can serve — in
// name order, until the ConfigMaps read hold the namespace's limit of policies. Those beyond
// are not read, hold nothing and are reported Dropped; when one before them goes, the next one
// is read. The informer's cache keeps names and versions only.
func TestPolicyFeedReadsOnlyWhatServes(t *testing.T) {
	c := &fakeCluster{cms: map[types.NamespacedName]*corev1.ConfigMap{}}
	f := &ClusterFeed{store: NewStore(policies.DefaultOptions(), newTestMetrics(t), nil), changed: make(chan struct{}, 1),
		read: c.read, log: logr.Discard()}
	ctx := t.Context()
	const n = policies.MaxNamespacePolicies + 8
	for i := range n {
		c.put(f, "team", fmt.Sprintf("cm-%02d", i), "1")
	}
	c.put(f, policies.DefaultPlatformNamespace, "platform", "1")
	require.True(t, f.readPending(ctx))
	f.store.MarkSynced()
	var want []string
	for i := range policies.MaxNamespacePolicies {
		want = append(want, fmt.Sprintf("cm-%02d", i))
	}
	require.Equal(t, append([]string{"platform"}, want...), c.reads, "the platform's, then the team's in name order up to its limit")
	snap := f.store.Snapshot()
	require.Equal(t, policies.MaxNamespacePolicies, snap.Set.Count(policies.ScopeNamespace))
	require.Equal(t, 1, snap.Set.Count(policies.ScopePlatform))
	var dropped []string
	for i := policies.MaxNamespacePolicies; i < n; i++ {
		dropped = append(dropped, fmt.Sprintf("cm-%02d", i))
	}
	require.Equal(t, map[string][]string{"team": dropped}, snap.Dropped, "the unread ones are reported left out")

	// Seen again at the same version (a relist): nothing is read.
	c.reads = nil
	for i := range n {
		c.put(f, "team", fmt.Sprintf("cm-%02d", i), "1")
	}
	require.True(t, f.readPending(ctx))
	require.Empty(t, c.reads, "compiled once per resourceVersion")

	// One before the limit goes: the first one left out is read, and served.
	delete(c.cms, types.NamespacedName{Namespace: "team", Name: "cm-00"})
	f.store.Delete(types.NamespacedName{Namespace: "team", Name: "cm-00"})
	f.store.unread("team") // as the feed's loop does after every change
	require.True(t, f.readPending(ctx))
	require.Equal(t, []string{"cm-32"}, c.reads)
	f.store.Publish()
	snap = f.store.Snapshot()
	require.Equal(t, policies.MaxNamespacePolicies, snap.Set.Count(policies.ScopeNamespace))
	require.Equal(t, dropped[1:], snap.Dropped["team"])

	// A new version is read once; an invalid one keeps the last good version.
	c.reads = nil
	c.put(f, "team", "cm-05", "2")
	c.cms[types.NamespacedName{Namespace: "team", Name: "cm-05"}].Data = map[string]string{"p.yaml": "not: [a policy"}
	require.True(t, f.readPending(ctx))
	require.Equal(t, []string{"cm-05"}, c.reads)
	f.store.Publish()
	snap = f.store.Snapshot()
	require.Equal(t, policies.MaxNamespacePolicies, snap.Set.Count(policies.ScopeNamespace), "the last good version")
	require.Equal(t, map[string][]string{"team": {"cm-05"}}, snap.Invalid)

	// The API server does not answer: the version stays to be read, and is read once it does.
	c.reads = nil
	c.put(f, "team", "cm-06", "2")
	c.fail = true
	require.False(t, f.readPending(ctx))
	c.fail = false
	require.True(t, f.readPending(ctx))
	require.Equal(t, []string{"cm-06"}, c.reads)

	// An earlier ConfigMap grows past the limit: the ones after it are dropped from memory.
	var docs []string
	for i := range 16 {
		docs = append(docs, fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: big-%d}\n"+
			"spec: {match: {managers: [dask]}, template: {metadata: {labels: {team: a}}}}\n", i))
	}
	c.put(f, "team", "cm-01", "3")
	big := c.cms[types.NamespacedName{Namespace: "team", Name: "cm-01"}]
	big.Data = map[string]string{"p.yaml": docs[0]}
	for _, d := range docs[1:] {
		big.Data["p.yaml"] += "---\n" + d
	}
	require.True(t, f.readPending(ctx))
	f.store.Publish()
	snap = f.store.Snapshot()
	f.store.mu.Lock()
	holding := 0
	for _, e := range f.store.byNS["team"] {
		if len(e.good) > 0 {
			holding++
		}
	}
	f.store.mu.Unlock()
	// cm-01 (16) + cm-02..cm-17 (16) reach 32: cm-18 on are not held.
	require.Equal(t, 17, holding, "the store holds the ConfigMaps that can serve only")
	require.Equal(t, policies.MaxNamespacePolicies, snap.Set.Count(policies.ScopeNamespace))
	require.Len(t, snap.Dropped["team"], n-1-17)

	// The informer's cache: names and versions only.
	meta, err := trimPolicyMetadata(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x",
		ResourceVersion: "7", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": "…"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}})
	require.NoError(t, err)
	require.Equal(t, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x", ResourceVersion: "7"}}, meta)
	cm := c.cms[types.NamespacedName{Namespace: "team", Name: "cm-02"}].DeepCopy()
	trimPolicyConfigMap(cm)
	require.Nil(t, cm.ManagedFields)
	require.Equal(t, map[string]string{"note": "kept"}, cm.Annotations)
}
