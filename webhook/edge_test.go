package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

const workerPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"w-","labels":{"dask.org/component":"worker","dask.org/cluster-name":"simple"}},"spec":{"containers":[{"name":"worker","image":"ghcr.io/dask/dask:latest"}]}}`

func policyCM(ns, name, body string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data:       map[string]string{"p.yaml": body},
	}
}

const labelPolicy = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: team}
spec:
  template:
    metadata:
      labels: {team: %s}
`

// TestMutateEdges sends bad and unusual requests; each gets the right answer and the handler
// keeps serving good requests afterwards.
func TestMutateEdges(t *testing.T) {
	m := newTestMetrics(t)
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), nil)
	require.Empty(t, store.Upsert(policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "a", 1))))
	store.MarkSynced()
	h := &Review{Handler: &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}

	good := func() {
		t.Helper()
		_, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
		require.NotNil(t, resp)
		require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"team":"a"`)
	}
	good()

	// The two answers most edges get: refused as a bad request, or let through unpatched.
	badRequest := func(t *testing.T, _ int, resp *admissionv1.AdmissionResponse) {
		require.NotNil(t, resp)
		require.False(t, resp.Allowed)
		require.Equal(t, int32(http.StatusBadRequest), resp.Result.Code)
	}
	letThrough := func(t *testing.T, _ int, resp *admissionv1.AdmissionResponse) {
		require.NotNil(t, resp)
		require.True(t, resp.Allowed)
		require.Empty(t, resp.Patch)
	}
	cases := []struct {
		name        string
		body        []byte
		contentType string
		check       func(t *testing.T, code int, resp *admissionv1.AdmissionResponse)
	}{
		{"malformed JSON", []byte(`{"request": {`), "application/json", badRequest},
		{"JSON that is no admission request", []byte(`{"apiVersion":"v1","kind":"Pod","request":{}}`), "application/json", badRequest},
		{"empty body", nil, "application/json", badRequest},
		{"wrong content type", review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "text/plain", func(t *testing.T, _ int, resp *admissionv1.AdmissionResponse) {
			require.NotNil(t, resp)
			require.False(t, resp.Allowed)
			require.Contains(t, resp.Result.Message, "contentType")
		}},
		{"oversized body", bytes.Repeat([]byte(" "), slots.MaxReviewSize+1), "application/json", func(t *testing.T, _ int, resp *admissionv1.AdmissionResponse) {
			require.NotNil(t, resp)
			require.False(t, resp.Allowed)
			require.Contains(t, resp.Result.Message, "too large")
		}},
		{"kind not handled", review(t, "ConfigMap", "team-a", admissionv1.Create, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`), false), "application/json", letThrough},
		{"update without the old object", review(t, "Pod", "team-a", admissionv1.Update, []byte(workerPod), false), "application/json", badRequest},
		{"delete not handled", review(t, "Pod", "team-a", admissionv1.Delete, []byte(workerPod), false), "application/json", letThrough},
		{"create without object", review(t, "Pod", "team-a", admissionv1.Create, nil, false), "application/json", badRequest},
		{"object that is not a pod", review(t, "Pod", "team-a", admissionv1.Create, []byte(`[1,2]`), false), "application/json", func(t *testing.T, _ int, resp *admissionv1.AdmissionResponse) {
			require.NotNil(t, resp)
			require.True(t, resp.Allowed, "never denied")
			require.Empty(t, resp.Patch)
			require.NotEmpty(t, resp.Warnings)
		}},
		{"unrecognised pod", review(t, "Pod", "team-a", admissionv1.Create, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`), false), "application/json", func(t *testing.T, _ int, resp *admissionv1.AdmissionResponse) {
			require.NotNil(t, resp)
			require.True(t, resp.Allowed)
			require.Empty(t, resp.Patch)
			require.Empty(t, resp.Warnings)
		}},
		{"dry run is patched the same way", review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), true), "application/json", func(t *testing.T, _ int, resp *admissionv1.AdmissionResponse) {
			require.NotNil(t, resp)
			require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"team":"a"`)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec, resp := post(t, h, c.body, c.contentType)
			c.check(t, rec.Code, resp)
			good()
		})
	}

	t.Run("namespace whose policies fail to compile", func(t *testing.T) {
		probs := store.Upsert(policyCM("team-a", "labels", strings.Replace(labelPolicy, "{team: %s}", "{team: [broken]}", 1)))
		require.NotEmpty(t, probs)
		store.Publish()
		_, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
		require.NotNil(t, resp)
		require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"team":"a"`, "last good version still applied")
		require.Len(t, resp.Warnings, 1)
		require.Contains(t, resp.Warnings[0], "team-a/labels")
		require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues("invalid_policy")))
		// Other namespaces are not warned about team-a's policies.
		_, resp = post(t, h, review(t, "Pod", "team-b", admissionv1.Create, []byte(workerPod), false), "application/json")
		require.NotNil(t, resp)
		require.Empty(t, resp.Warnings)
		require.Empty(t, resp.Patch)
	})
	require.Positive(t, testutil.ToFloat64(m.admissions.WithLabelValues("Pod", "dask", "worker", "patched")))
}

// TestValidate denies invalid policy ConfigMaps with lint's messages and allows the rest.
func TestValidate(t *testing.T) {
	m := newTestMetrics(t)
	h := &Review{Handler: &Validator{Options: policies.DefaultOptions(), Metrics: m}}
	send := func(cm *corev1.ConfigMap, op admissionv1.Operation) *admissionv1.AdmissionResponse {
		t.Helper()
		cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
		raw, err := json.Marshal(cm)
		require.NoError(t, err)
		_, resp := post(t, h, review(t, "ConfigMap", cm.Namespace, op, raw, false), "application/json")
		require.NotNil(t, resp)
		return resp
	}
	ok := policyCM("team-a", "ok", strings.Replace(labelPolicy, "%s", "a", 1))
	require.True(t, send(ok, admissionv1.Create).Allowed)
	require.True(t, send(ok, admissionv1.Update).Allowed)

	bad := policyCM("team-a", "bad", strings.Replace(labelPolicy, "labels: {team: %s}", "labelz: {team: a}", 1))
	resp := send(bad, admissionv1.Create)
	require.False(t, resp.Allowed)
	require.Contains(t, resp.Result.Message, "team-a/bad: p.yaml: team: spec.template.metadata.labelz: Forbidden: unknown field")

	enforce := policyCM("team-a", "enforce", strings.Replace(strings.Replace(labelPolicy, "%s", "a", 1), "spec:\n", "spec:\n  mode: enforce\n", 1))
	resp = send(enforce, admissionv1.Update)
	require.False(t, resp.Allowed)
	require.Contains(t, resp.Result.Message, "spec.mode: Forbidden: enforce is for platform policies only")

	unlabelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "plain"}, Data: map[string]string{"x": "y"}}
	require.True(t, send(unlabelled, admissionv1.Create).Allowed)
	require.Equal(t, 2.0, testutil.ToFloat64(m.validations.WithLabelValues("denied")))
}
