package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/vap"
)

// TestVAP: `podpatch vap` prints, for the examples' enforce policies, a ValidatingAdmissionPolicy
// and its binding per manager and role of a Pod and per manager of a Service, each stating the
// policies that select those, and says on stderr what each policy checks.
func TestVAP(t *testing.T) {
	r := podpatch(t, "", "vap", "--policies", examples)
	require.Equal(t, 0, r.code, r.stderr)
	var names []string
	for _, doc := range documents(t, r.stdout) {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &meta))
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			decodeInto(t, doc, &p)
			names = append(names, p.Name)
			require.Equal(t, vap.ManagedBy, p.Labels[vap.ManagedByLabel])
			require.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy)
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			decodeInto(t, doc, &b)
			require.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions)
			require.Contains(t, b.Spec.MatchResources.NamespaceSelector.String(), "kube-system")
		default:
			t.Fatalf("unexpected %s", meta.Kind)
		}
	}
	require.Equal(t, []string{"podpatch.pod.dask.job", "podpatch.pod.dask.scheduler", "podpatch.pod.dask.worker",
		"podpatch.pod.dask-gateway.scheduler", "podpatch.pod.dask-gateway.worker", "podpatch.pod.spark.scheduler", "podpatch.pod.spark.worker",
		"podpatch.pod.ray.scheduler", "podpatch.pod.ray.worker", "podpatch.pod.flink.scheduler", "podpatch.pod.flink.worker",
		"podpatch.service.dask", "podpatch.service.dask-gateway", "podpatch.service.spark", "podpatch.service.ray", "podpatch.service.flink"}, names)
	require.Equal(t, 4, strings.Count(r.stderr, "field(s) checked"), r.stderr)
	require.NotContains(t, r.stderr, "not checked")
}

// TestVAPNotChecked: a field CEL does not check is listed, on stderr and in the annotation.
func TestVAPNotChecked(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: p, namespace: podpatch-system, labels: {podpatch.io/policy: "true"}}
data:
  p.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: scratch}
    spec:
      mode: enforce
      template: {spec: {runtimeClassName: gvisor, volumes: [{name: scratch, emptyDir: {}}]}}
`)
	r := podpatch(t, "", "vap", "--policies", dir)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "podpatch-system/p/scratch (Pod): 1 field(s) checked, not checked: spec.volumes (a list)")
	require.Contains(t, r.stdout, "# not checked: podpatch-system/p/scratch: spec.volumes (a list)")
	require.Contains(t, r.stdout, vap.NotCheckedAnnotation+": 'podpatch-system/p/scratch: spec.volumes (a list)'")
	require.Contains(t, requireOneLineError(t, podpatch(t, "", "vap"), 2), "at least one --policies PATH is required")
}
