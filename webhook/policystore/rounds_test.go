package policystore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies"
)

// floodFeed is a cluster feed on a fake cluster, and a writer of new versions of its ConfigMaps.
type floodFeed struct {
	*ClusterFeed
	c  *fakeCluster
	rv int
}

func newFloodFeed(t *testing.T) *floodFeed {
	c := &fakeCluster{cms: map[types.NamespacedName]*corev1.ConfigMap{}}
	return &floodFeed{c: c, ClusterFeed: &ClusterFeed{store: New(policies.DefaultOptions(), newTestMetrics(t), nil),
		changed: make(chan struct{}, 1), list: c.list, log: logr.Discard()}}
}

// write writes a new version of each ConfigMap named, as the informer then tells the feed.
func (f *floodFeed) write(ns string, names ...string) {
	for _, name := range names {
		f.rv++
		f.c.put(f.ClusterFeed, ns, name, strconv.Itoa(f.rv))
	}
}

// compiled is the version of a ConfigMap the store compiled last.
func (f *floodFeed) compiled(ns, name string) string {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	if e := f.store.entries[types.NamespacedName{Namespace: ns, Name: name}]; e != nil {
		return e.resourceVersion
	}
	return ""
}

// configMapNames are cm-00, cm-01, … cm-<n-1>.
func configMapNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("cm-%02d", i)
	}
	return out
}

// TestRoundsServeThePlatformFirst: under a tenant's flood — every read of one of its ConfigMaps
// finds all of them rewritten, so its backlog never ends — each round reads at most roundReads
// of the tenant's ConfigMaps, and a platform ConfigMap is compiled in the first round after it
// arrives, whatever the backlog: written between two rounds, it is the next round's first read;
// written while a round reads the tenant's, that round stops after the read in flight and the
// next one reads it first. The publish after that round serves it (reference §5, "Policy
// source"). Counted in rounds and reads, not in time.
func TestRoundsServeThePlatformFirst(t *testing.T) {
	f := newFloodFeed(t)
	ctx := t.Context()
	platform := policies.DefaultPlatformNamespace
	tenant := configMapNames(24)
	f.write("flood", tenant...)
	require.True(t, f.readAll(ctx))
	f.store.MarkSynced()
	f.write("flood", tenant...) // the flood begins
	platformDuring := -1        // the tenant read, counted in c.keys, during which the platform writes
	f.c.onRead = func(key types.NamespacedName) {
		if key.Namespace != "flood" {
			return
		}
		f.write("flood", tenant...)
		if len(f.c.keys) == platformDuring {
			f.write(platform, "enforce")
			platformDuring = -1
		}
	}
	for range 3 {
		f.c.keys = nil
		require.True(t, f.round(ctx, nil))
		require.Len(t, f.c.keys, roundReads, "a round reads at most roundReads of the tenant's")
		f.store.Publish()
	}
	require.True(t, f.store.isPending("flood"), "the tenant's backlog")
	gen := f.store.Snapshot().Set.Generation()

	// Written while the round reads the tenant's: the round stops after the read in flight.
	f.c.keys, platformDuring = nil, 3
	require.True(t, f.round(ctx, nil))
	require.Len(t, f.c.keys, 3)
	f.c.keys = nil
	require.True(t, f.round(ctx, nil))
	require.Equal(t, types.NamespacedName{Namespace: platform, Name: "enforce"}, f.c.keys[0], "the next round reads it first")
	require.Len(t, f.c.keys, 1+roundReads)
	f.store.Publish()
	snap := f.store.Snapshot()
	require.Equal(t, 1, snap.Set.Count(policies.ScopePlatform), "served by the publish after that round")
	require.NotEqual(t, gen, snap.Set.Generation())

	// Written between two rounds: the next round's first read, and its latest version.
	f.write(platform, "enforce", "enforce-2")
	f.write(platform, "enforce")
	f.c.keys = nil
	require.True(t, f.round(ctx, nil))
	require.Equal(t, []types.NamespacedName{{Namespace: platform, Name: "enforce"}, {Namespace: platform, Name: "enforce-2"}}, f.c.keys[:2])
	require.Equal(t, strconv.Itoa(f.rv-len(tenant)*roundReads), f.compiled(platform, "enforce"), "its latest version")
	f.store.Publish()
	require.Equal(t, 2, f.store.Snapshot().Set.Count(policies.ScopePlatform))
	require.True(t, f.store.isPending("flood"), "the tenant's backlog")
}

// TestRoundsAreFairBetweenTenants: tenants flooding at once each progress — the rounds serve
// their namespaces in turn (round-robin across rounds), and a namespace's ConfigMaps in turn,
// so every ConfigMap of every tenant is compiled again and again — and a tenant that changes
// one ConfigMap while the others flood has it read in the next round.
func TestRoundsAreFairBetweenTenants(t *testing.T) {
	f := newFloodFeed(t)
	ctx := t.Context()
	const tenants, rounds = 5, 10
	names := configMapNames(4)
	ns := func(i int) string { return fmt.Sprintf("tenant-%d", i) }
	for i := range tenants {
		f.write(ns(i), names...)
	}
	f.write("quiet", "cm-00")
	require.True(t, f.readAll(ctx))
	f.store.MarkSynced()
	f.c.onRead = func(types.NamespacedName) {
		for i := range tenants {
			f.write(ns(i), names...)
		}
	}
	f.c.onRead(types.NamespacedName{}) // the flood begins
	f.c.keys = nil
	for range rounds {
		require.True(t, f.round(ctx, nil))
	}
	require.Len(t, f.c.keys, rounds*roundReads)
	perNS, perCM := map[string]int{}, map[types.NamespacedName]int{}
	for _, k := range f.c.keys {
		perNS[k.Namespace]++
		perCM[k]++
	}
	for i := range tenants {
		require.Equal(t, rounds*roundReads/tenants, perNS[ns(i)], "%s: its share of the reads", ns(i))
		for _, name := range names {
			require.Equal(t, rounds*roundReads/tenants/len(names), perCM[types.NamespacedName{Namespace: ns(i), Name: name}],
				"%s/%s: read in turn with its namespace's others", ns(i), name)
		}
	}

	// A quiet tenant's change, during the flood: read in the next round.
	f.write("quiet", "cm-00")
	f.c.keys = nil
	require.True(t, f.round(ctx, nil))
	require.Contains(t, f.c.keys, types.NamespacedName{Namespace: "quiet", Name: "cm-00"})
	require.Equal(t, strconv.Itoa(f.rv-tenants*len(names)*roundReads), f.compiled("quiet", "cm-00"))
}

// TestRoundsCoalesceWrites: a ConfigMap rewritten many times between two reads is read once, at
// its latest version; a read that gives a version the informer reports meanwhile is not read
// again; and a ConfigMap rewritten without pause does not keep its namespace's other ConfigMaps
// from being read.
func TestRoundsCoalesceWrites(t *testing.T) {
	f := newFloodFeed(t)
	ctx := t.Context()
	f.write("team", "hot", "quiet")
	require.True(t, f.readAll(ctx))
	f.store.MarkSynced()

	for range 50 {
		f.write("team", "hot")
	}
	f.c.keys = nil
	require.True(t, f.round(ctx, nil))
	require.Equal(t, []types.NamespacedName{{Namespace: "team", Name: "hot"}}, f.c.keys)
	require.Equal(t, strconv.Itoa(f.rv), f.compiled("team", "hot"))

	// Rewritten while it is read: the read gives the new version, which is not read again.
	f.c.onRead = func(key types.NamespacedName) { f.write(key.Namespace, key.Name) }
	f.write("team", "hot")
	f.c.keys = nil
	require.True(t, f.round(ctx, nil))
	require.Len(t, f.c.keys, 1)
	require.Equal(t, strconv.Itoa(f.rv), f.compiled("team", "hot"))
	require.False(t, f.store.isPending("team"), "nothing left to read")

	// hot rewritten at every read, quiet changed once: quiet is read in the next round.
	f.write("team", "quiet")
	f.c.keys = nil
	require.True(t, f.round(ctx, nil))
	require.True(t, f.round(ctx, nil))
	require.Contains(t, f.c.keys, types.NamespacedName{Namespace: "team", Name: "quiet"})
}

// TestStartUnderFlood: a tenant rewriting its ConfigMaps while podpatch starts does not keep it
// from becoming ready: the start reads each pending ConfigMap once (drain), and what changed
// since is the rounds'.
func TestStartUnderFlood(t *testing.T) {
	f := newFloodFeed(t)
	tenant := configMapNames(fewReads - 2)
	f.write("flood", tenant...)
	f.write(policies.DefaultPlatformNamespace, "enforce")
	f.c.onRead = func(types.NamespacedName) { f.write("flood", tenant...) }
	require.True(t, f.readAll(t.Context()))
	require.Len(t, f.c.keys, 1+len(tenant), "each once")
	f.store.MarkSynced()
	snap := f.store.Snapshot()
	require.Equal(t, 1, snap.Set.Count(policies.ScopePlatform))
	require.Equal(t, len(tenant), snap.Set.Count(policies.ScopeNamespace))
	require.True(t, f.store.isPending("flood"))
}

// TestWindowPublishesAPlatformChangeAtOnce: a window that reads a platform change is due at once
// when no platform change was published within PublishDelay, however far the tenants' window
// still runs: it reads no tenant's ConfigMap after it. (Were it held to the tenants' window,
// the test would wait for its hour and fail at its context's deadline.) A window already due
// reads one round of the tenants'.
func TestWindowPublishesAPlatformChangeAtOnce(t *testing.T) {
	f := newFloodFeed(t)
	tenant := configMapNames(24)
	f.write("flood", tenant...)
	require.True(t, f.readAll(t.Context()))
	f.store.MarkSynced()
	f.c.onRead = func(key types.NamespacedName) {
		if key.Namespace == "flood" {
			f.write("flood", tenant...)
		}
	}
	f.write("flood", tenant...) // the flood begins
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	f.c.keys = nil
	require.True(t, f.window(ctx, time.Now().Add(-time.Second), time.Time{}))
	require.Len(t, f.c.keys, roundReads, "due already: one round")
	f.store.Publish()

	f.write(policies.DefaultPlatformNamespace, "enforce")
	f.c.keys = nil
	require.True(t, f.window(ctx, time.Now().Add(time.Hour), time.Time{}))
	require.Equal(t, []types.NamespacedName{{Namespace: policies.DefaultPlatformNamespace, Name: "enforce"}}, f.c.keys)
	f.store.Publish()
	require.Equal(t, 1, f.store.Snapshot().Set.Count(policies.ScopePlatform))
}
