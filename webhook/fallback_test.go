package webhook

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// TestMutateFallbackReasons: each way the engine leaves whole layers out is counted under its
// own warning reason, and the rest of the policies still apply.
func TestMutateFallbackReasons(t *testing.T) {
	doc := func(name, spec string) string {
		return "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name + "}\nspec:\n" + spec
	}
	configMap := func(ns string, docs ...string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns,
			Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": strings.Join(docs, "---\n")}}
	}
	enforce := doc("baseline", "  mode: enforce\n  template: {metadata: {labels: {baseline: applied}}}\n")
	// a labels what b selects; b labels what makes a stop matching: no fixed point.
	a := doc("a", "  match: {selector: {matchExpressions: [{key: phase-b, operator: DoesNotExist}]}}\n  template: {metadata: {labels: {phase-a: \"1\"}}}\n")
	b := doc("b", "  match: {selector: {matchLabels: {phase-a: \"1\"}}}\n  template: {metadata: {labels: {phase-b: \"1\"}}}\n")
	// The same pair in a namespace: the platform's policies apply alone.
	nsA := strings.Replace(a, "{name: a}", "{name: ns-a}", 1)
	nsB := strings.Replace(b, "{name: b}", "{name: ns-b}", 1)

	raw, err := os.ReadFile("../policies/testdata/fixtures/dask-operator/worker-pod.yaml")
	require.NoError(t, err)
	pod, err := yaml.YAMLToJSON(raw)
	require.NoError(t, err)

	for _, tc := range []struct {
		name       string
		cms        []*corev1.ConfigMap
		reason     Reason
		wantLabels map[string]string
	}{
		{"platform selectors diverge", []*corev1.ConfigMap{configMap(policies.DefaultPlatformNamespace, enforce, a, b)},
			ReasonSelectionDiverges, map[string]string{"baseline": "applied"}},
		{"namespace selectors diverge", []*corev1.ConfigMap{configMap(policies.DefaultPlatformNamespace, enforce), configMap("default", nsA, nsB)},
			ReasonNamespacePoliciesLeftOut, map[string]string{"baseline": "applied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []*policies.Policy
			for _, cm := range tc.cms {
				p, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
				require.Empty(t, probs)
				ps = append(ps, p...)
			}
			m := newTestMetrics(t)
			h := &Review{Handler: &Mutator{Source: staticSource{snap: &policystore.Snapshot{Set: policies.NewSet(ps)}}, Metrics: m,
				PlatformNamespace: policies.DefaultPlatformNamespace}}
			_, resp := post(t, h, review(t, "Pod", "default", admissionv1.Create, pod, false), "application/json")
			require.NotNil(t, resp)
			require.Len(t, resp.Warnings, 1)
			var got corev1.Pod
			require.NoError(t, yaml.Unmarshal(applyResponse(t, pod, resp), &got))
			for k, v := range tc.wantLabels {
				require.Equal(t, v, got.Labels[k], "label %s", k)
			}
			for _, r := range []Reason{ReasonSelectionDiverges, ReasonNamespacePoliciesLeftOut} {
				want := 0.0
				if r == tc.reason {
					want = 1
				}
				require.Equal(t, want, testutil.ToFloat64(m.warnings.WithLabelValues(string(r))), "reason %s", r)
			}
		})
	}
}
