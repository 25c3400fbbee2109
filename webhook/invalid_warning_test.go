package webhook

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// TestInvalidWarningLastGoodOnlyWhereOne: the admission warning about a policy ConfigMap that
// fails to compile says "their last good version was applied" only for a ConfigMap that had
// one; a ConfigMap that never compiled is named as having none, and nothing of it applied
// (the warning said a last good version was applied for a ConfigMap created broken).
func TestInvalidWarningLastGoodOnlyWhereOne(t *testing.T) {
	m := newTestMetrics(t)
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), nil)
	h := &Review{Handler: &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
	broken := strings.Replace(labelPolicy, "{team: %s}", "{team: [broken]}", 1)
	require.Empty(t, store.Upsert(policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "a", 1))))
	store.MarkSynced()
	require.NotEmpty(t, store.Upsert(policyCM("team-a", "labels", broken)))   // had a good version
	require.NotEmpty(t, store.Upsert(policyCM("team-a", "born-bad", broken))) // never had one
	store.Publish()
	require.Equal(t, map[string][]string{"team-a": {"born-bad"}}, store.Snapshot().NeverGood)

	_, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
	require.NotNil(t, resp)
	require.Len(t, resp.Warnings, 2, "%q", resp.Warnings)
	require.Contains(t, resp.Warnings[0], "team-a/labels fail to compile; their last good version was applied")
	require.NotContains(t, resp.Warnings[0], "born-bad")
	require.Contains(t, resp.Warnings[1], "team-a/born-bad fail to compile and have no good version: none of their policies was applied")
	require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"team":"a"`, "the last good version of labels still applies")
}
