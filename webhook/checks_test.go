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
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// TestMutateFindings: the manager-aware checks' findings are admission warnings within the bound
// the policies left out share (at most maxSkippedWarnings, then "and N more"), the most urgent
// first (an error finding before policies left out, warning findings last), every finding is
// counted by podpatch_check_findings_total{check}, and the patch is the one without checks.
func TestMutateFindings(t *testing.T) {
	var docs []string
	for i := range 4 { // four defaults naming a missing PriorityClass: left out
		docs = append(docs, fmt.Sprintf("apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: class-%d}\n"+
			"spec:\n  mode: default\n  priority: %d\n  template: {spec: {priorityClassName: missing-%d}}\n", i, i, i))
	}
	docs = append(docs,
		// A warning finding: GPUs `ray start` does not know of.
		"apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: gpu}\nspec:\n  match: {managers: [ray], roles: [worker]}\n"+
			"  template: {spec: {containers: [{name: \"@main\", resources: {limits: {nvidia.com/gpu: \"1\"}}}]}}\n",
		// An error finding: a memory limit below `ray start --memory`.
		"apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: shrink}\nspec:\n  match: {managers: [ray], roles: [worker]}\n"+
			"  template: {spec: {containers: [{name: \"@main\", resources: {limits: {memory: 512Mi}, requests: {memory: 512Mi}}}]}}\n")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: policies.DefaultPlatformNamespace,
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": strings.Join(docs, "---\n")}}
	ps, probs := policies.ParseConfigMap(cm, policies.DefaultOptions())
	require.Empty(t, probs)
	set := policies.NewSet(ps)
	m := newTestMetrics(t)
	h := &Review{Handler: &Mutator{Source: staticSource{snap: &policystore.Snapshot{Set: set}}, Metrics: m,
		PlatformNamespace: policies.DefaultPlatformNamespace, Lookups: noClasses{}}}

	b, err := os.ReadFile("../policies/testdata/fixtures/kuberay/worker-pod.yaml")
	require.NoError(t, err)
	pod, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	_, resp := post(t, h, review(t, "Pod", "default", admissionv1.Create, pod, false), "application/json")
	require.NotNil(t, resp)

	require.Len(t, resp.Warnings, maxSkippedWarnings+1, "%q", resp.Warnings)
	require.Contains(t, resp.Warnings[0], checks.RayResources+" (error) podpatch-system/p/shrink")
	for _, w := range resp.Warnings[1:maxSkippedWarnings] {
		require.Contains(t, w, "podpatch-system/p/class-")
	}
	for _, w := range resp.Warnings {
		require.LessOrEqual(t, len(w), maxWarningLength)
	}
	require.Contains(t, resp.Warnings[maxSkippedWarnings], "3 more")
	require.Equal(t, 2.0, testutil.ToFloat64(m.findings.WithLabelValues(checks.RayResources)), "every finding counted, shown or not")
	require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonCheckFinding))))
	require.Equal(t, 2.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonPolicySkipped))))

	// The patch is the one render computes: the checks change nothing.
	res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: "default", Lookups: noClasses{}})
	require.NoError(t, err)
	require.Len(t, res.Findings, 2)
	require.JSONEq(t, string(res.Object), string(applyResponse(t, pod, resp)))
}
