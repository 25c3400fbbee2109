package policystore

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
)

// TestStoreCompileBudget: a compile past the store's budget refuses the ConfigMap with the
// budget named, keeps the last good version, and the next resync compiles it again.
func TestStoreCompileBudget(t *testing.T) {
	m := newTestMetrics(t)
	s := New(policies.DefaultOptions(), m, nil)
	cm := policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "a", 1))
	cm.ResourceVersion = "1"
	require.Empty(t, s.Upsert(cm))
	s.MarkSynced()

	next := policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "b", 1))
	next.ResourceVersion = "2"
	s.compileBudget = time.Nanosecond
	probs := s.Upsert(next)
	require.Len(t, probs, 1)
	require.Contains(t, probs.Error(), "not compiled within its budget: context deadline exceeded: the policy store's compile budget is 1ns")
	s.Publish()
	require.Equal(t, []string{"labels"}, s.Snapshot().Invalid["team-a"])
	require.Equal(t, 1, s.Snapshot().Set.Count(policies.ScopeNamespace), "last good kept")

	s.compileBudget = DefaultCompileBudget
	require.Empty(t, s.Upsert(next), "the same version is compiled again, not skipped as done")
	s.Publish()
	require.Empty(t, s.Snapshot().Invalid)
}
