package webhook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// envPolicy sets a label and a literal env value unique to the namespace it lives in, the
// values that must not reach an object of another namespace.
const envPolicy = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: secret}
spec:
  template:
    metadata:
      labels: {owner: %[1]s}
    spec:
      containers:
        - name: "*"
          env:
            - {name: TENANT_TOKEN, value: "token-of-%[1]s"}
`

// TestNamespaceOnlyFromRequest: only the request's namespace selects namespace policies (reference
// §5). Generated objects carry every form of metadata.namespace — absent, empty, null, the
// request's, another tenant's, the platform's, a differently cased or padded name, a number,
// an object, duplicated keys in either order — under requests for every namespace. An object
// whose metadata.namespace is set and disagrees is allowed unchanged with a counted warning;
// any other object gets exactly the request namespace's policies, and never a value of
// another namespace's.
func TestNamespaceOnlyFromRequest(t *testing.T) {
	m := newTestMetrics(t)
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), nil)
	tenants := []string{"team-a", "team-b", "team-c", "default"}
	for _, ns := range tenants {
		require.Empty(t, store.Upsert(policyCM(ns, "secret", fmt.Sprintf(envPolicy, ns))))
	}
	store.MarkSynced()
	h := &Review{Name: "mutate", Handler: &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}

	// Each form is the JSON of the metadata's namespace member(s), and what it says: the
	// namespace the object claims, "" for none.
	type form struct {
		members string // inserted before "labels" in metadata
		claims  func(reqNS string) (ns string, mismatch bool)
	}
	literal := func(v string) func(string) (string, bool) {
		return func(req string) (string, bool) { return v, v != req }
	}
	none := func(string) (string, bool) { return "", false }
	forms := []form{
		{``, none},
		{`"namespace":"",`, none},
		{`"namespace":null,`, none},
		{`"namespace":5,`, func(string) (string, bool) { return "5", true }},
		{`"namespace":{"name":"team-a"},`, func(string) (string, bool) { return "{}", true }},
		{`"namespace":["team-a"],`, func(string) (string, bool) { return "[]", true }},
	}
	for _, ns := range append(tenants, policies.DefaultPlatformNamespace, "nobody", "Team-A", " team-a", "team-a ", strings.Repeat("x", 300)) {
		forms = append(forms, form{fmt.Sprintf(`"namespace":%q,`, ns), literal(ns)})
		// A differently cased key is another member: the merge reads only "namespace".
		forms = append(forms, form{fmt.Sprintf(`"Namespace":%q,`, ns), none})
		for _, other := range tenants {
			// Duplicated keys: the last one is the object's namespace, as the merge reads it.
			forms = append(forms, form{fmt.Sprintf(`"namespace":%q,"namespace":%q,`, other, ns), literal(ns)})
		}
	}
	// Objects of every recognised shape: the worker pod, with or without other metadata before
	// the namespace, and with its containers in either order.
	objects := func(members string, rng *rand.Rand) string {
		before := []string{``, `"name":"w-1",`, `"annotations":{"a":"b"},`}[rng.IntN(3)]
		return `{"apiVersion":"v1","kind":"Pod","metadata":{` + before + members +
			`"generateName":"w-","labels":{"dask.org/component":"worker","dask.org/cluster-name":"simple"}},` +
			`"spec":{"containers":[{"name":"worker","image":"ghcr.io/dask/dask:latest"}]}}`
	}
	rng := rand.New(rand.NewPCG(21, 5))
	warned := 0
	checked := map[bool]int{}
	for _, f := range forms {
		for _, reqNS := range append(tenants, policies.DefaultPlatformNamespace, "nobody") {
			obj := objects(f.members, rng)
			require.True(t, json.Valid([]byte(obj)), obj)
			claimed, mismatch := f.claims(reqNS)
			name := fmt.Sprintf("request %s, object %s", reqNS, f.members)
			_, resp := post(t, h, review(t, "Pod", reqNS, admissionv1.Create, []byte(obj), false), "application/json")
			require.NotNil(t, resp, name)
			got := applyResponse(t, []byte(obj), resp)
			checked[mismatch]++
			if mismatch {
				warned++
				require.Empty(t, resp.Patch, "%s: claims %q, must be allowed unchanged", name, claimed)
				require.Len(t, resp.Warnings, 1, name)
				require.Contains(t, resp.Warnings[0], "metadata.namespace", name)
				require.LessOrEqual(t, len(resp.Warnings[0]), 300, "%s: the warning does not repeat a long value", name)
				continue
			}
			var pod struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
				Spec struct {
					Containers []struct {
						Env []struct{ Name, Value string } `json:"env"`
					} `json:"containers"`
				} `json:"spec"`
			}
			require.NoError(t, json.Unmarshal(got, &pod), name)
			var values []string
			for _, c := range pod.Spec.Containers {
				for _, e := range c.Env {
					values = append(values, e.Value)
				}
			}
			if !slices.Contains(tenants, reqNS) {
				require.Empty(t, resp.Patch, "%s: no policies in %s", name, reqNS)
				continue
			}
			require.Equal(t, []string{"token-of-" + reqNS}, values, name)
			require.Equal(t, reqNS, pod.Metadata.Labels["owner"], name)
			for _, other := range tenants {
				if other != reqNS {
					require.NotContains(t, string(got), "token-of-"+other, name)
				}
			}
		}
	}
	require.Positive(t, checked[true])
	require.Positive(t, checked[false])
	require.Equal(t, float64(warned), testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonNamespaceMismatch))))
}

// TestValidateScopeFromRequest: a policy ConfigMap is validated in the scope of the request's
// namespace, where the API server stores it, whatever its metadata.namespace says: a namespace
// policy that claims to live in the platform namespace is still held to namespace rules.
func TestValidateScopeFromRequest(t *testing.T) {
	m := newTestMetrics(t)
	h := &Review{Name: "validate", Handler: &Validator{Options: policies.DefaultOptions(), Metrics: m}}
	platformOnly := `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: narrow}
spec:
  match: {namespaces: ["team-*"]}
  template:
    metadata:
      labels: {a: b}
`
	for _, claimed := range []string{"", policies.DefaultPlatformNamespace, "team-a", "team-b"} {
		for _, reqNS := range []string{policies.DefaultPlatformNamespace, "team-a", "team-b"} {
			cm := policyCM(claimed, "p", platformOnly)
			cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
			raw, err := json.Marshal(cm)
			require.NoError(t, err)
			_, resp := post(t, h, review(t, "ConfigMap", reqNS, admissionv1.Create, raw, false), "application/json")
			require.NotNil(t, resp)
			want := reqNS == policies.DefaultPlatformNamespace // namespaces narrow platform policies only
			require.Equal(t, want, resp.Allowed, "request %s, object says %q: %v", reqNS, claimed, resp.Result)
		}
	}
}
