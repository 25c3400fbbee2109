package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// updateReview is an UPDATE review (of a subresource when sub is set) with its old object.
func updateReview(t *testing.T, kind, sub string, obj, old []byte) []byte {
	t.Helper()
	var ar admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(review(t, kind, "team-a", admissionv1.Update, obj, false), &ar))
	ar.Request.SubResource, ar.Request.OldObject = sub, runtime.RawExtension{Raw: old}
	b, err := json.Marshal(ar)
	require.NoError(t, err)
	return b
}

const enforceInternalLB = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: internal-lb}
spec:
  mode: enforce
  match: {managers: [dask]}
  template:
    metadata:
      labels: {cost-center: data}
    spec:
      containers:
        - name: "*"
          securityContext: {allowPrivilegeEscalation: false}
  service:
    metadata:
      annotations: {networking.gke.io/load-balancer-type: Internal}
    spec:
      type: ClusterIP
`

const schedulerService = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"simple-scheduler","labels":{"dask.org/component":"scheduler","dask.org/cluster-name":"simple"}},"spec":{"type":"ClusterIP","selector":{"dask.org/component":"scheduler","dask.org/cluster-name":"simple"},"ports":[{"name":"tcp-comm","port":8786,"targetPort":"tcp-comm","protocol":"TCP"}]}}`

// enforceHandler is the mutating handler serving enforceInternalLB from a synced store.
func enforceHandler(t *testing.T) (*Review, *policystore.Store, *Metrics) {
	t.Helper()
	m := newTestMetrics(t)
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), nil)
	require.Empty(t, store.Upsert(policyCM(policies.DefaultPlatformNamespace, "enforce", enforceInternalLB)))
	store.MarkSynced()
	h := &Review{Handler: &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
	return h, store, m
}

// TestMutateUpdates: through the HTTP handler, an UPDATE that undoes what an enforce policy set
// gets it back with a warning; an update of an object that did not hold the policy before is
// left as it is, warned; an added ephemeral container gets the "*" entry's fields; the
// subresources that change no policy field are not looked at.
func TestMutateUpdates(t *testing.T) {
	h, _, m := enforceHandler(t)
	create := func(kind string, obj []byte) []byte {
		t.Helper()
		_, resp := post(t, h, review(t, kind, "team-a", admissionv1.Create, obj, false), "application/json")
		require.NotNil(t, resp)
		return applyResponse(t, obj, resp)
	}
	update := func(kind, sub string, obj, old []byte) *admissionv1.AdmissionResponse {
		t.Helper()
		_, resp := post(t, h, updateReview(t, kind, sub, obj, old), "application/json")
		require.NotNil(t, resp)
		return resp
	}

	svc := create("Service", []byte(schedulerService))
	lb := []byte(strings.Replace(strings.Replace(string(svc), `"type":"ClusterIP"`, `"type":"LoadBalancer"`, 1), `"networking.gke.io/load-balancer-type":"Internal"`, `"x":"y"`, 1))
	resp := update("Service", "", lb, svc)
	got := applyResponse(t, lb, resp)
	require.Contains(t, string(got), `"type":"ClusterIP"`)
	require.Contains(t, string(got), `"networking.gke.io/load-balancer-type":"Internal"`)
	require.Contains(t, string(got), `"x":"y"`, "what the update changed beyond the enforce policy's fields stays")
	require.Len(t, resp.Warnings, 1)
	require.Contains(t, resp.Warnings[0], "podpatch-system/enforce/internal-lb hold on every update; what this update undid of them was put back")
	require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonEnforceRestored))))

	// Not held before the update: left as it is.
	resp = update("Service", "", lb, []byte(schedulerService))
	require.Empty(t, resp.Patch)
	require.True(t, resp.Allowed)
	require.Len(t, resp.Warnings, 1)
	require.Contains(t, resp.Warnings[0], "as stored before this update, this service does not hold the platform's enforce policies podpatch-system/enforce/internal-lb (")
	require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonEnforceNotHeld))))

	// A Pod's label removed comes back; an ephemeral container added gets the "*" entry.
	pod := create("Pod", []byte(workerPod))
	unlabelled := []byte(strings.Replace(string(pod), `,"cost-center":"data"`, ``, 1))
	require.NotEqual(t, string(pod), string(unlabelled))
	require.Contains(t, string(applyResponse(t, unlabelled, update("Pod", "", unlabelled, pod))), `"cost-center":"data"`)
	debug := []byte(strings.Replace(string(pod), `"spec":{`, `"spec":{"ephemeralContainers":[{"name":"debugger","image":"busybox"}],`, 1))
	resp = update("Pod", "ephemeralcontainers", debug, pod)
	require.Contains(t, string(applyResponse(t, debug, resp)), `{"name":"debugger","image":"busybox","securityContext":{"allowPrivilegeEscalation":false}}`)
	require.Len(t, resp.Warnings, 1)
	require.Contains(t, resp.Warnings[0], "what this ephemeral container undid of them was put back")
	// `kubectl debug --profile=sysadmin` (privileged) cannot hold the enforced baseline: denied.
	privileged := []byte(strings.Replace(string(debug), `"image":"busybox"`, `"image":"busybox","securityContext":{"privileged":true}`, 1))
	resp = update("Pod", "ephemeralcontainers", privileged, pod)
	require.False(t, resp.Allowed)
	require.Contains(t, resp.Result.Message, "podpatch-system/enforce/internal-lb: spec.ephemeralContainers[debugger].securityContext: cannot set `allowPrivilegeEscalation` to false and `privileged` to true")

	// Subresources that set no policy field, and deletions, are not looked at.
	for _, sub := range []string{"status", "binding", "eviction"} {
		resp := update("Pod", sub, unlabelled, pod)
		require.Empty(t, resp.Patch, sub)
		require.Empty(t, resp.Warnings, sub)
	}
}

// TestMutateUpdatePartlyHeld: an enforce policy added after the Service was admitted did not
// hold on it; the one that did is still put back, and the warnings say both.
func TestMutateUpdatePartlyHeld(t *testing.T) {
	h, store, m := enforceHandler(t)
	svcIn := []byte(schedulerService)
	_, resp := post(t, h, review(t, "Service", "team-a", admissionv1.Create, svcIn, false), "application/json")
	svc := applyResponse(t, svcIn, resp)

	require.Empty(t, store.Upsert(policyCM(policies.DefaultPlatformNamespace, "later", `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: later}
spec:
  mode: enforce
  match: {managers: [dask]}
  service:
    metadata:
      annotations: {platform.example.com/later: "yes"}
`)))
	store.Publish()
	lb := []byte(strings.Replace(string(svc), `"type":"ClusterIP"`, `"type":"LoadBalancer"`, 1))
	_, resp = post(t, h, updateReview(t, "Service", "", lb, svc), "application/json")
	require.NotNil(t, resp)
	got := string(applyResponse(t, lb, resp))
	require.Contains(t, got, `"type":"ClusterIP"`, "the policy that held is put back")
	require.NotContains(t, got, "platform.example.com/later", "the one that did not hold is not applied")
	require.Len(t, resp.Warnings, 2)
	require.Contains(t, resp.Warnings[0], "as stored before this update, this service does not hold the platform's enforce policies podpatch-system/later/later (metadata.annotations.platform.example.com/later: the policy sets it, the object lacks it)")
	require.Contains(t, resp.Warnings[1], "podpatch-system/enforce/internal-lb hold on every update")
	require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonEnforceNotHeld))))
	require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonEnforceRestored))))
}
