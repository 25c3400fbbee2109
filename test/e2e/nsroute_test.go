package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
)

const nsRouteNamespace = "e2e-nsroute"

// TestNamespacePolicyCannotLeaveEnforceOut is reference §5's namespace-policy route through the
// real API server: a namespace team writes policies built to get the platform's enforce policy
// left out — a label its selector excludes, a nodeSelector the enforced RuntimeClass
// contradicts — and the Dask worker is stored with every enforced field, the namespace
// policies left out with a warning naming them.
func TestNamespacePolicyCannotLeaveEnforceOut(t *testing.T) {
	ctx := contextBackground()
	ensureNamespace(t, nsRouteNamespace)
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-nsroute-sandbox"}, Handler: "runsc",
		Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"sandbox.example.com/runtime": "gvisor"}}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, rc)))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), rc) })
	servePodpatch(t)

	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-nsroute", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: sandbox}\nspec:\n  mode: enforce\n" +
		"  match:\n    managers: [dask]\n    namespaces: [" + nsRouteNamespace + "]\n    selector: {matchExpressions: [{key: tier, operator: NotIn, values: [free]}]}\n" +
		"  template:\n    metadata: {labels: {cost-center: data-platform}}\n    spec: {runtimeClassName: e2e-nsroute-sandbox}\n"})
	createPolicies(t, nsRouteNamespace, "team", map[string]string{
		"free-tier.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: free-tier}\nspec:\n  template:\n    metadata: {labels: {tier: free}}\n",
		"own-nodes.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: own-nodes}\nspec:\n  template:\n    spec: {nodeSelector: {sandbox.example.com/runtime: none}}\n",
	})
	worker := func(name string) *corev1.Pod {
		pod := labPod(t, "dask-operator/worker-pod.yaml", name, nil)
		pod.Namespace = nsRouteNamespace
		return pod
	}
	c, warnings := warnedClient(t)
	var stored *corev1.Pod
	require.Eventually(t, func() bool {
		stored = worker("nsroute-worker")
		warnings.take()
		require.NoError(t, c.Create(ctx, stored, client.DryRunAll))
		return stored.Spec.RuntimeClassName != nil && strings.Contains(strings.Join(warnings.take(), "\n"), nsRouteNamespace+"/team/")
	}, 30*time.Second, 200*time.Millisecond, "never both: the enforced RuntimeClass stored and a warning naming the namespace's policies")

	stored = worker("nsroute-worker")
	require.NoError(t, c.Create(ctx, stored))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), stored, client.GracePeriodSeconds(0)) })
	said := strings.Join(warnings.take(), "\n")
	require.Equal(t, "e2e-nsroute-sandbox", *stored.Spec.RuntimeClassName, "the enforced RuntimeClass holds")
	require.Equal(t, "data-platform", stored.Labels["cost-center"])
	require.Equal(t, "gvisor", stored.Spec.NodeSelector["sandbox.example.com/runtime"], "the RuntimeClass's scheduling, not the namespace's nodeSelector")
	require.NotEqual(t, "free", stored.Labels["tier"], "the label that would unselect the enforce policy is left out")
	require.Contains(t, said, nsRouteNamespace+"/team/free-tier")
	require.Contains(t, said, nsRouteNamespace+"/team/own-nodes")
	require.Contains(t, stored.Annotations[policies.AppliedAnnotation], "podpatch-system/e2e-nsroute/sandbox")
	require.NotContains(t, stored.Annotations[policies.AppliedAnnotation], nsRouteNamespace+"/team/")
}
