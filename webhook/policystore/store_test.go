package policystore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podpatch/podpatch/policies"
)

// policyCM is a policy ConfigMap holding body as p.yaml.
func policyCM(ns, name, body string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data:       map[string]string{"p.yaml": body},
	}
}

// labelPolicy sets the label team to its %s.
const labelPolicy = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: team}
spec:
  template:
    metadata:
      labels: {team: %s}
`

func newTestMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return m
}

// TestStoreKeepsLastGood: an invalid new version of a ConfigMap leaves the old one in force,
// is reported once, and a delete removes whatever was there.
func TestStoreKeepsLastGood(t *testing.T) {
	var reported []string
	s := New(policies.DefaultOptions(), newTestMetrics(t), func(cm *corev1.ConfigMap, p policies.Problems) {
		reported = append(reported, cm.Name+": "+p.Error())
	})
	require.Empty(t, s.Upsert(policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "a", 1))))
	require.False(t, s.Synced())
	require.Zero(t, s.Snapshot().Set.Count(policies.ScopeNamespace), "nothing published before the first sync")
	s.MarkSynced()
	require.Equal(t, 1, s.Snapshot().Set.Count(policies.ScopeNamespace))

	require.NotEmpty(t, s.Upsert(policyCM("team-a", "labels", "not: [valid")))
	s.Publish()
	require.Len(t, reported, 1)
	require.Contains(t, reported[0], "labels: p.yaml")
	snap := s.Snapshot()
	require.Equal(t, 1, snap.Set.Count(policies.ScopeNamespace), "last good version kept")
	require.Equal(t, []string{"labels"}, snap.Invalid["team-a"])

	s.Delete(keyOf("team-a", "labels"))
	s.Publish()
	require.Zero(t, s.Snapshot().Set.Count(policies.ScopeNamespace))
	require.Empty(t, s.Snapshot().Invalid)
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// TestStoreCompilesOncePerVersion: a resync (the same resourceVersion again) compiles nothing,
// a burst of changes is served by one Publish, and the directory feed reads only changed files.
func TestStoreCompilesOncePerVersion(t *testing.T) {
	m := newTestMetrics(t)
	s := New(policies.DefaultOptions(), m, nil)
	compiled := func() float64 { return testutil.ToFloat64(m.reloads.WithLabelValues("ok")) }
	for i := range 50 {
		cm := policyCM(fmt.Sprintf("team-%d", i%5), fmt.Sprintf("labels-%d", i), strings.Replace(labelPolicy, "%s", "a", 1))
		cm.ResourceVersion = "1"
		require.Empty(t, s.Upsert(cm))
	}
	require.Zero(t, s.Snapshot().Set.Count(policies.ScopeNamespace), "a burst is served only once published")
	s.MarkSynced()
	require.Equal(t, 50, s.Snapshot().Set.Count(policies.ScopeNamespace))
	require.Equal(t, 50.0, compiled())

	before := s.Snapshot()
	for i := range 50 { // a resync: the same versions again
		cm := policyCM(fmt.Sprintf("team-%d", i%5), fmt.Sprintf("labels-%d", i), strings.Replace(labelPolicy, "%s", "a", 1))
		cm.ResourceVersion = "1"
		require.Empty(t, s.Upsert(cm))
	}
	require.Equal(t, 50.0, compiled(), "nothing compiled again")
	s.Publish()
	require.Same(t, before, s.Snapshot(), "a resync publishes nothing")

	cm := policyCM("team-0", "labels-0", strings.Replace(labelPolicy, "%s", "b", 1))
	cm.ResourceVersion = "2"
	require.Empty(t, s.Upsert(cm))
	s.Publish()
	require.Equal(t, 51.0, compiled())
	require.NotEqual(t, before.Set.Generation(), s.Snapshot().Set.Generation())

	dir := t.TempDir()
	dm := newTestMetrics(t)
	feed, _ := NewDirFeed(dir, time.Hour, policies.DefaultOptions(), dm, logr.Discard())
	for i := range 20 {
		body := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: labels-" + fmt.Sprint(i) + "\n  namespace: team-a\n  labels: {podpatch.io/policy: \"true\"}\ndata:\n  p.yaml: |\n" +
			indent(strings.Replace(labelPolicy, "%s", "a", 1), "    ")
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("p%d.yaml", i)), []byte(body), 0o644))
	}
	require.NoError(t, feed.Load())
	require.NoError(t, feed.Load())
	require.Equal(t, 20.0, testutil.ToFloat64(dm.reloads.WithLabelValues("ok")), "an unchanged directory is not read again")
	future := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(dir, "p3.yaml"), future, future))
	require.NoError(t, feed.Load())
	require.Equal(t, 21.0, testutil.ToFloat64(dm.reloads.WithLabelValues("ok")), "only the changed file is read")
}

// TestStoreReadyOnlyOncePublished: whoever sees the store synced (the readiness probe) also sees
// every policy of the first load, never the empty Set before it.
func TestStoreReadyOnlyOncePublished(t *testing.T) {
	s := New(policies.DefaultOptions(), newTestMetrics(t), nil)
	cms := storeConfigMaps(2000)
	for _, cm := range cms {
		require.Empty(t, s.Upsert(cm))
	}
	seen := make(chan int)
	go func() {
		for !s.Synced() {
			runtime.Gosched()
		}
		set := s.Snapshot().Set
		seen <- set.Count(policies.ScopePlatform) + set.Count(policies.ScopeNamespace)
	}()
	s.MarkSynced()
	require.Equal(t, len(cms), <-seen)
}
