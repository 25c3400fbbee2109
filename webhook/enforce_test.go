package webhook

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// enforceSnapshot serves one platform enforce policy for the Dask workers of team-a: a
// ServiceAccount and a label.
func enforceSnapshot(t testing.TB) *policystore.Snapshot {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "baseline", Namespace: policies.DefaultPlatformNamespace,
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\n" +
		"metadata: {name: sa}\nspec:\n  mode: enforce\n  match: {managers: [dask], namespaces: [team-a]}\n" +
		"  template: {metadata: {labels: {baseline: applied}}, spec: {serviceAccountName: platform-sa}}\n"}}
	ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Empty(t, probs)
	return &policystore.Snapshot{Set: policies.NewSet(ps)}
}

// accounts is a Cluster whose caches hold the given ServiceAccounts (namespace/name) only.
type accounts map[string]bool

func (accounts) PriorityClass(string) (validity.PriorityClassInfo, validity.Presence) {
	return validity.PriorityClassInfo{}, validity.Absent
}
func (accounts) RuntimeClass(string) (validity.RuntimeClassInfo, validity.Presence) {
	return validity.RuntimeClassInfo{}, validity.Absent
}
func (a accounts) ServiceAccount(ns, name string) validity.Presence {
	if a[ns+"/"+name] {
		return validity.Present
	}
	return validity.Absent
}
func (accounts) LimitRanges(string) ([]corev1.LimitRangeItem, bool) { return nil, true }
func (accounts) ServiceIPFamilies() ([]corev1.IPFamily, bool)       { return nil, false }

// TestEnforceAppliedOrDenied: an object an enforce policy binds is patched with it, or denied
// naming it and why — never admitted without it (reference §5): a missing reference is a 403,
// the budget a 429; an object it does not bind is admitted as before.
func TestEnforceAppliedOrDenied(t *testing.T) {
	m := newTestMetrics(t)
	mutator := &Mutator{Source: staticSource{snap: enforceSnapshot(t)}, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace,
		Lookups: accounts{"team-a/platform-sa": true}}
	h := &Review{Name: "mutate", Handler: mutator, Metrics: m}
	body := review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false)

	_, resp := post(t, h, body, "application/json")
	require.True(t, resp.Allowed)
	require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"serviceAccountName":"platform-sa"`)

	// The tenant deleted the ServiceAccount the platform enforces.
	mutator.Lookups = accounts{}
	rec, resp := post(t, h, body, "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	require.False(t, resp.Allowed)
	require.Empty(t, resp.Patch)
	require.Equal(t, int32(http.StatusForbidden), resp.Result.Code)
	require.Contains(t, resp.Result.Message, "podpatch-system/baseline/sa")
	require.Contains(t, resp.Result.Message, validity.RuleServiceAccountNotFound)
	require.Equal(t, 1.0, testutil.ToFloat64(m.denials.WithLabelValues(validity.RuleServiceAccountNotFound)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.admissions.WithLabelValues("Pod", "dask", "worker", "denied")))

	// Another namespace: the policy does not bind it, the Pod is admitted untouched.
	_, resp = post(t, h, review(t, "Pod", "team-b", admissionv1.Create, []byte(workerPod), false), "application/json")
	require.True(t, resp.Allowed)
	require.Empty(t, resp.Patch)

	// No budget left at all: a 429, to be retried.
	mutator.Lookups = accounts{"team-a/platform-sa": true}
	rec, resp = post(t, &Review{Name: "mutate", Handler: mutator, Metrics: m, Budget: time.Nanosecond}, body, "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	require.False(t, resp.Allowed)
	require.Equal(t, int32(http.StatusTooManyRequests), resp.Result.Code)
	require.Contains(t, resp.Result.Message, "podpatch-system/baseline/sa")
	require.Contains(t, resp.Result.Message, "retry")
}

// TestEnforceUnderOverload: when podpatch is overloaded, a request an enforce policy could bind
// is denied (429) rather than admitted unchanged — whether its body was read (the policy is
// selected on the object) or only its head (the policy is selected by kind and namespace) —
// and a request no enforce policy binds is admitted unchanged as before.
func TestEnforceUnderOverload(t *testing.T) {
	m := newTestMetrics(t)
	bounds := slots.New(slots.Options{MaxInFlight: 1, LargeBytes: 1})
	_, _, release := occupy(t, bounds, m) // the only slot, and the room for large bodies, are taken
	defer release()

	h := &Review{Name: "mutate", Slots: bounds, Metrics: m, Budget: 10 * time.Millisecond,
		Handler: &Mutator{Source: staticSource{snap: enforceSnapshot(t)}, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
	denied := func(t *testing.T, resp *admissionv1.AdmissionResponse) {
		t.Helper()
		require.NotNil(t, resp)
		require.False(t, resp.Allowed)
		require.Equal(t, int32(http.StatusTooManyRequests), resp.Result.Code)
		require.Contains(t, resp.Result.Message, "podpatch-system/baseline/sa")
		require.Contains(t, resp.Result.Message, "overloaded")
	}
	t.Run("head only: no room for the body", func(t *testing.T) {
		for _, c := range []struct {
			ns     string
			denied bool
		}{{"team-a", true}, {"team-b", false}} {
			rec := serveMutate(h, review(t, "Pod", c.ns, admissionv1.Create, maxSizePod(t, slots.MaxReviewSize-4096), false))
			var out admissionv1.AdmissionReview
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
			if c.denied {
				denied(t, out.Response)
			} else {
				requireFallback(t, rec, out.Response, "uid-Pod", "overloaded")
			}
		}
	})
	t.Run("body read, no slot", func(t *testing.T) {
		_, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
		denied(t, resp)
		// Not a manager's object: no enforce policy binds it.
		rec, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(`{"kind":"Pod","metadata":{"name":"p"},"spec":{}}`), false), "application/json")
		requireFallback(t, rec, resp, "uid-Pod", "overloaded")
	})
}
