package policystore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	reads []string // names read one by one
	keys  []types.NamespacedName
	lists int // pages listed
	fail  bool
	// onRead, if set, runs as a ConfigMap is read one by one (before the read gives it): what
	// the cluster's writers do meanwhile.
	onRead func(key types.NamespacedName)
}

// list lists as the API server does: by namespace and name, by pages of o.Limit, or the one
// ConfigMap of a metadata.name field selector.
func (c *fakeCluster) list(_ context.Context, ns string, o metav1.ListOptions) (*corev1.ConfigMapList, error) {
	if c.fail {
		return nil, errors.New("connection refused")
	}
	out := &corev1.ConfigMapList{}
	if name, ok := strings.CutPrefix(o.FieldSelector, "metadata.name="); ok {
		key := types.NamespacedName{Namespace: ns, Name: name}
		c.reads, c.keys = append(c.reads, name), append(c.keys, key)
		if c.onRead != nil {
			c.onRead(key)
		}
		if cm := c.cms[types.NamespacedName{Namespace: ns, Name: name}]; cm != nil {
			out.Items = append(out.Items, *cm.DeepCopy()) // a read is a new object, as from the API server
		}
		return out, nil
	}
	c.lists++
	keys := slices.SortedFunc(maps.Keys(c.cms), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	start, _ := strconv.Atoi(o.Continue)
	for i := start; i < len(keys); i++ {
		if ns != "" && keys[i].Namespace != ns {
			continue
		}
		if int64(len(out.Items)) == o.Limit {
			out.Continue = strconv.Itoa(i)
			break
		}
		out.Items = append(out.Items, *c.cms[keys[i]].DeepCopy())
	}
	return out, nil
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
	f := &ClusterFeed{store: New(policies.DefaultOptions(), newTestMetrics(t), nil), changed: make(chan struct{}, 1),
		list: c.list, log: logr.Discard()}
	ctx := t.Context()
	const n = policies.MaxNamespacePolicies + 8
	for i := range n {
		c.put(f, "team", fmt.Sprintf("cm-%02d", i), "1")
	}
	c.put(f, policies.DefaultPlatformNamespace, "platform", "1")
	require.True(t, f.readAll(ctx))
	f.store.MarkSynced()
	var want []string
	for i := range policies.MaxNamespacePolicies {
		want = append(want, fmt.Sprintf("cm-%02d", i))
	}
	require.Equal(t, []string{"platform"}, c.reads, "the team's are so many they are listed, the platform's one is read")
	require.Equal(t, 5, c.lists, "by pages of readPage")
	f.store.mu.Lock()
	for name, e := range f.store.byNS["team"] {
		require.Equal(t, slices.Contains(want, name), e.resourceVersion != "", "%s compiled only if it can serve", name)
	}
	f.store.mu.Unlock()
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
	require.True(t, f.readAll(ctx))
	require.Empty(t, c.reads, "compiled once per resourceVersion")

	// One before the limit goes: the first one left out is read, and served.
	delete(c.cms, types.NamespacedName{Namespace: "team", Name: "cm-00"})
	f.store.Delete(types.NamespacedName{Namespace: "team", Name: "cm-00"})
	f.store.unread("team") // as the feed's loop does after every change
	require.True(t, f.readAll(ctx))
	require.Equal(t, []string{"cm-32"}, c.reads)
	f.store.Publish()
	snap = f.store.Snapshot()
	require.Equal(t, policies.MaxNamespacePolicies, snap.Set.Count(policies.ScopeNamespace))
	require.Equal(t, dropped[1:], snap.Dropped["team"])

	// A few more than fewReads changed among many: read one by one, not by listing them all
	// again (a tenant changing a few ConfigMaps does not make podpatch read hundreds).
	c.reads, c.lists = nil, 0
	var changed []string
	for i := 10; i < 10+fewReads+1; i++ {
		changed = append(changed, fmt.Sprintf("cm-%02d", i))
		c.put(f, "team", changed[len(changed)-1], "1b")
	}
	require.True(t, f.readAll(ctx))
	require.Equal(t, changed, c.reads)
	require.Zero(t, c.lists)

	// A new version is read once; an invalid one keeps the last good version.
	c.reads = nil
	c.put(f, "team", "cm-05", "2")
	c.cms[types.NamespacedName{Namespace: "team", Name: "cm-05"}].Data = map[string]string{"p.yaml": "not: [a policy"}
	require.True(t, f.readAll(ctx))
	require.Equal(t, []string{"cm-05"}, c.reads)
	f.store.Publish()
	snap = f.store.Snapshot()
	require.Equal(t, policies.MaxNamespacePolicies, snap.Set.Count(policies.ScopeNamespace), "the last good version")
	require.Equal(t, map[string][]string{"team": {"cm-05"}}, snap.Invalid)

	// The API server does not answer: the version stays to be read, and is read once it does.
	c.reads = nil
	c.put(f, "team", "cm-06", "2")
	c.fail = true
	require.False(t, f.readAll(ctx))
	c.fail = false
	require.True(t, f.readAll(ctx))
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
	require.True(t, f.readAll(ctx))
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

	// Many namespaces at once (podpatch's start): one list of them all, by pages.
	c = &fakeCluster{cms: map[types.NamespacedName]*corev1.ConfigMap{}}
	f = &ClusterFeed{store: New(policies.DefaultOptions(), newTestMetrics(t), nil), changed: make(chan struct{}, 1),
		list: c.list, log: logr.Discard()}
	for ns := range fewReads + 1 {
		for i := range 2 {
			c.put(f, fmt.Sprintf("ns-%d", ns), fmt.Sprintf("cm-%d", i), "1")
		}
	}
	require.True(t, f.readAll(ctx))
	f.store.MarkSynced()
	require.Equal(t, 3, c.lists, "by pages of readPage")
	require.Empty(t, c.reads)
	require.Equal(t, 2*(fewReads+1), f.store.Snapshot().Set.Count(policies.ScopeNamespace))
}

// TestPolicyFeedKeepsNoText: the policy informer's cache keeps of a ConfigMap its namespace,
// name and resourceVersion only (its metadata, trimmed: no labels, annotations or managed
// fields, and never its data, which the feed reads when it compiles a version and drops); a
// ConfigMap read for compiling loses kubectl's last-applied copy of its text and its managed
// fields first.
func TestPolicyFeedKeepsNoText(t *testing.T) {
	meta, err := trimPolicyMetadata(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x",
		ResourceVersion: "7", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": "…"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}})
	require.NoError(t, err)
	require.Equal(t, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "x", ResourceVersion: "7"}}, meta)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lastApplied: "{}", "note": "kept"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	trimPolicyConfigMap(cm)
	require.Nil(t, cm.ManagedFields)
	require.Equal(t, map[string]string{"note": "kept"}, cm.Annotations)

}
