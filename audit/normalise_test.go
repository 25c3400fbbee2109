package audit

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// setOf compiles one platform ConfigMap holding the given policy documents.
func setOf(t *testing.T, docs string) *policies.Set {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "p", ResourceVersion: "7",
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": docs}}
	opts := policies.DefaultOptions()
	opts.WithResourceVersion = true
	ps, probs := policies.ParseConfigMap(cm, opts)
	require.Empty(t, probs)
	return policies.NewSet(ps)
}

const workerPolicies = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: gpu}
spec:
  match: {roles: [worker]}
  template:
    spec:
      hostNetwork: false
      tolerations: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
      containers: [{name: "*", resources: {limits: {cpu: 1000m, memory: 4096Mi}}}]
---
apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: pool}
spec:
  mode: enforce
  match: {roles: [worker]}
  template:
    spec:
      nodeSelector: {pool: gpu}
      containers: [{name: "*", resources: {limits: {memory: 4Gi}}}]
`

// storedWorker is a worker as the API server stores what the policies above produce: quantities
// canonical, the toleration's operator defaulted, the false hostNetwork dropped, defaults added.
const storedWorker = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team-a","uid":"u1",
 "labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"},
 "annotations":{"podpatch.io/applied":"podpatch-system/p/gpu@7,podpatch-system/p/pool@7"},
 "ownerReferences":[{"apiVersion":"kubernetes.dask.org/v1","kind":"DaskWorkerGroup","name":"c-default","uid":"o1","controller":true}]},
 "spec":{"nodeSelector":{"pool":"gpu"},"dnsPolicy":"ClusterFirst","schedulerName":"default-scheduler",
 "tolerations":[{"key":"nvidia.com/gpu","operator":"Equal","value":"present","effect":"NoSchedule"},
  {"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],
 "containers":[{"name":"worker","image":"dask","imagePullPolicy":"Always","terminationMessagePath":"/dev/termination-log",
  "resources":{"limits":{"cpu":"1","memory":"4Gi"},"requests":{"cpu":"1","memory":"4Gi"}}}]}}`

// TestCheckIgnoresWhatTheAPIServerNormalises: what the API server makes of a patched object —
// canonical quantities, defaulted fields, dropped zero values, added tolerations — is no drift.
func TestCheckIgnoresWhatTheAPIServerNormalises(t *testing.T) {
	set := setOf(t, workerPolicies)
	f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: []byte(storedWorker)})
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, f.Drift, "%v", f.Fields)
	require.Equal(t, ComputeCluster{Manager: profiles.ManagerDask, Role: profiles.RoleWorker, Name: "c",
		Owner: &Owner{APIVersion: "kubernetes.dask.org/v1", Kind: "DaskWorkerGroup", Name: "c-default", UID: "o1"}}, f.Cluster)
}

// TestCheckKeepsPointerFalse: a policy's false for a pointer field (allowPrivilegeEscalation)
// is not what an unset field means, unlike a plain bool's false that the API server drops.
func TestCheckKeepsPointerFalse(t *testing.T) {
	set := setOf(t, `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: baseline}
spec:
  mode: enforce
  template:
    spec:
      hostNetwork: false
      containers: [{name: "*", securityContext: {allowPrivilegeEscalation: false}}]
`)
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team-a","labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"},
 "annotations":{"podpatch.io/applied":"podpatch-system/p/baseline@7"}},"spec":{"containers":[{"name":"worker","image":"dask"%s}]}}`
	f, _, err := Check(set, Object{Kind: profiles.KindPod, JSON: fmt.Appendf(nil, pod, `,"securityContext":{"allowPrivilegeEscalation":false}`)})
	require.NoError(t, err)
	require.False(t, f.Drift, "%v", f.Fields)
	f, _, err = Check(set, Object{Kind: profiles.KindPod, JSON: fmt.Appendf(nil, pod, "")})
	require.NoError(t, err)
	require.True(t, f.Drift)
	require.Equal(t, EnforceBroken, f.Reason, "the enforced field is gone since admission")
	require.Equal(t, []string{"spec.containers[worker].securityContext.allowPrivilegeEscalation"}, f.Fields)
	require.Equal(t, []FieldChange{{Field: f.Fields[0], Manager: UnknownManager, Unknown: UnknownRemoved}}, f.Policies[0].ChangedBy)
}

// TestCheckAttributesFieldsToTheDecidingPolicy: a field two policies set belongs to the later
// layer's; a real difference in a quantity is drift.
func TestCheckAttributesFieldsToTheDecidingPolicy(t *testing.T) {
	set := setOf(t, workerPolicies)
	edited := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","namespace":"team-a",
 "labels":{"dask.org/component":"worker","dask.org/cluster-name":"c"}},
 "spec":{"tolerations":[{"key":"nvidia.com/gpu","operator":"Equal","value":"present","effect":"NoSchedule"}],
 "containers":[{"name":"worker","image":"dask","resources":{"limits":{"cpu":"1","memory":"2Gi"}}}]}}`)
	f, ok, err := Check(set, Object{Kind: profiles.KindPod, JSON: edited})
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, f.Drift)
	require.Equal(t, NeverPatched, f.Reason)
	require.Equal(t, []string{"spec.containers[worker].resources.limits.memory", "spec.nodeSelector.pool"}, f.Fields)
	require.Len(t, f.Policies, 2)
	require.Equal(t, "podpatch-system/p/gpu@7", f.Policies[0].Ref)
	require.False(t, f.Policies[0].Drift, "gpu's memory is overridden by pool: %v", f.Policies[0].Fields)
	require.Equal(t, "podpatch-system/p/pool@7", f.Policies[1].Ref)
	require.Equal(t, f.Fields, f.Policies[1].Fields)
}
