package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/native"
)

// TestMap: `podpatch map` compiles the examples' policies it can into MutatingAdmissionPolicies
// and bindings, one per manager and role, and lists every other policy part, per field, with the
// reason it stays with the webhook; --kube-version chooses the API version.
func TestMap(t *testing.T) {
	r := podpatch(t, "", "map", "--policies", examples)
	require.Equal(t, 0, r.code, r.stderr)
	var policies, bindings []string
	for _, doc := range documents(t, r.stdout) {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal(doc, &meta))
		require.Equal(t, "admissionregistration.k8s.io/v1", meta.APIVersion)
		switch meta.Kind {
		case "MutatingAdmissionPolicy":
			var p admissionregistrationv1.MutatingAdmissionPolicy
			decodeInto(t, doc, &p)
			policies = append(policies, p.Name)
			require.Equal(t, native.ManagedBy, p.Labels[native.ManagedByLabel])
			require.NotEmpty(t, p.Spec.Mutations)
		case "MutatingAdmissionPolicyBinding":
			var b admissionregistrationv1.MutatingAdmissionPolicyBinding
			decodeInto(t, doc, &b)
			bindings = append(bindings, b.Spec.PolicyName)
			require.Equal(t, []string{"kube-node-lease", "kube-system", "podpatch-system"},
				b.Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Values)
		default:
			t.Fatalf("unexpected %s", meta.Kind)
		}
	}
	require.Equal(t, policies, bindings)
	require.Contains(t, policies, "podpatch.dask.worker.pod")
	require.Contains(t, policies, "podpatch.spark.worker.pod")
	require.Contains(t, r.stderr, "2 policy part(s) compiled into 11 MutatingAdmissionPolicies, 7 left to the webhook")
	require.Contains(t, r.stderr, `podpatch-system/gpu-workers/gpu-workers (Pod): left to the webhook: spec.containers[@main].resources: containers: only env variables set to a non-empty value compile in this release`)
	require.NotContains(t, r.stderr, "podpatch-system/spark-spot/spot-executors (Pod)")
	require.Contains(t, r.stderr, "podpatch-system/cost-center/cost-center (Service): left to the webhook: service: ")
	require.Contains(t, r.stdout, "# podpatch-system/security-baseline/security-baseline (Pod): left to the webhook: spec.securityContext: ")

	beta := podpatch(t, "", "map", "--policies", examples, "--kube-version", "1.35")
	require.Equal(t, 0, beta.code, beta.stderr)
	docs := documents(t, beta.stdout)
	require.NotEmpty(t, docs)
	var p admissionregistrationv1beta1.MutatingAdmissionPolicy
	decodeInto(t, docs[0], &p)
	require.Equal(t, "admissionregistration.k8s.io/v1beta1", p.APIVersion)
	require.Equal(t, strings.Count(r.stdout, "kind: MutatingAdmissionPolicy\n"), strings.Count(beta.stdout, "kind: MutatingAdmissionPolicy\n"))

	require.Contains(t, requireOneLineError(t, podpatch(t, "", "map"), 2), "at least one --policies PATH is required")
	require.Contains(t, requireOneLineError(t, podpatch(t, "", "map", "--policies", examples, "--kube-version", "1.33"), 2), "need Kubernetes 1.34 or later")
	require.Contains(t, requireOneLineError(t, podpatch(t, "", "map", "--policies", examples, "--kube-version", "v1.36"), 2), "want MAJOR.MINOR")
}
