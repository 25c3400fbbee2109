package webhook

import (
	"fmt"
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
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// noClasses is a Cluster whose synced caches hold no PriorityClass, RuntimeClass or
// ServiceAccount, and no LimitRange.
type noClasses struct{}

func (noClasses) PriorityClass(string) (validity.PriorityClassInfo, validity.Presence) {
	return validity.PriorityClassInfo{}, validity.Absent
}
func (noClasses) RuntimeClass(string) (validity.RuntimeClassInfo, validity.Presence) {
	return validity.RuntimeClassInfo{}, validity.Absent
}
func (noClasses) ServiceAccount(string, string) validity.Presence    { return validity.Absent }
func (noClasses) LimitRanges(string) ([]corev1.LimitRangeItem, bool) { return nil, true }
func (noClasses) ServiceIPFamilies() ([]corev1.IPFamily, bool)       { return nil, false }

// TestMutateSkipped: a policy that would make the Pod invalid is left out; the response applies
// the others and says, in a bounded number of warnings, which policy was left out and by which
// rule, counted by podpatch_policy_skipped_total.
func TestMutateSkipped(t *testing.T) {
	var docs []string
	for i := range 5 { // five policies naming a missing PriorityClass, one that applies
		docs = append(docs, fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: class-%d}\n"+
			"spec:\n  mode: default\n  priority: %d\n  template: {spec: {priorityClassName: missing-%d}}\n", i, i, i))
	}
	docs = append(docs, "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: team}\nspec:\n  template: {metadata: {labels: {team: a}}}\n")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: policies.DefaultPlatformNamespace,
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": strings.Join(docs, "---\n")}}
	ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Empty(t, probs)
	m := newTestMetrics(t)
	h := &Review{Handler: &Mutator{Source: staticSource{snap: &policystore.Snapshot{Set: policies.NewSet(ps)}}, Metrics: m,
		PlatformNamespace: policies.DefaultPlatformNamespace, Lookups: noClasses{}}}

	b, err := os.ReadFile("../policies/testdata/fixtures/dask-operator/worker-pod.yaml")
	require.NoError(t, err)
	pod, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	_, resp := post(t, h, review(t, "Pod", "default", admissionv1.Create, pod, false), "application/json")
	require.NotNil(t, resp)
	var got corev1.Pod
	require.NoError(t, yaml.Unmarshal(applyResponse(t, pod, resp), &got))
	require.Equal(t, "a", got.Labels["team"])
	require.Empty(t, got.Spec.PriorityClassName)
	require.Equal(t, "podpatch-system/p/team", got.Annotations[policies.AppliedAnnotation])

	require.Len(t, resp.Warnings, maxSkippedWarnings+1)
	for _, w := range resp.Warnings[:maxSkippedWarnings] {
		require.Contains(t, w, "podpatch-system/p/class-")
		require.Contains(t, w, validity.RulePriorityClassNotFound)
		require.LessOrEqual(t, len(w), maxWarningLength)
	}
	require.Contains(t, resp.Warnings[maxSkippedWarnings], "2 more")
	require.Equal(t, 5.0, testutil.ToFloat64(m.skipped.WithLabelValues(validity.RulePriorityClassNotFound)))
	require.Equal(t, float64(maxSkippedWarnings), testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonPolicySkipped))))

	// Unknown caches leave nothing out.
	h.Handler.(*Mutator).Lookups = nil
	_, resp = post(t, h, review(t, "Pod", "default", admissionv1.Create, pod, false), "application/json")
	require.Empty(t, resp.Warnings)
	got = corev1.Pod{}
	require.NoError(t, yaml.Unmarshal(applyResponse(t, pod, resp), &got))
	require.Equal(t, "missing-4", got.Spec.PriorityClassName) // the later default wins
	require.Nil(t, got.Spec.Priority, "the Priority plugin computes it again")
}
