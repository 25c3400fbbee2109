package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// manifestAdmissionGate is kube-apiserver's feature gate of manifest-based admission control
// (KEP-5793): alpha and off in 1.36, beta and on in 1.37.
const manifestAdmissionGate = "ManifestBasedAdmissionControlConfig"

// staticBundleFlags are the kube-apiserver flags of a control plane that loads the bundle whose
// AdmissionConfiguration is config: the gate on, beside the lane's gates.
func staticBundleFlags(config string) []string {
	gates := manifestAdmissionGate + "=true"
	for _, f := range strings.Split(os.Getenv(cluster.APIServerFlagsEnv), ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(f), "="); ok && k == "feature-gates" {
			gates = v + "," + gates
		}
	}
	return []string{"feature-gates=" + gates, "admission-control-config-file=" + config}
}

// TestNativeStatic: a kube-apiserver of its own started with the bundle `podpatch map --static`
// writes for manifests/examples (the gate on, --admission-control-config-file its
// AdmissionConfiguration) applies the compiled policies to a Spark executor from startup, with
// no object installed through the API; the static MAPs and VAPs can be neither read, deleted
// nor replaced through the API; and the second line's static VAP refuses an executor missing
// the enforce policy the MAPs leave to the webhook (security-baseline).
func TestNativeStatic(t *testing.T) {
	bin := filepath.Join(repoRoot, "bin")
	apiserver := cluster.KubeBin(bin, "kube-apiserver")
	help, err := exec.Command(apiserver, "-h").CombinedOutput()
	require.NoError(t, err, "%s -h", apiserver)
	if !strings.Contains(string(help), manifestAdmissionGate+"=true|false") {
		version, _ := exec.Command(apiserver, "--version").Output()
		t.Skipf("%s (%s) does not know the feature gate %s: manifest-based admission control needs Kubernetes 1.36 or later",
			apiserver, strings.TrimSpace(string(version)), manifestAdmissionGate)
	}
	if v, _ := testKubeVersion(t); v.Minor < 36 {
		t.Skipf("the bundle's MAPs are admissionregistration.k8s.io/v1, served from 1.36; this lane's API server is 1.%d", v.Minor)
	}

	bundle := filepath.Join(t.TempDir(), "bundle")
	out, err := exec.Command(podpatchBin, "map", "--static", bundle, "--policies", filepath.Join(repoRoot, "manifests", "examples")).Output()
	require.NoError(t, err)
	config := filepath.Join(bundle, "admission-configuration.yaml")
	require.Contains(t, string(out), "wrote "+config)
	cp, err := cluster.StartWithFlags(bin, t.TempDir(), staticBundleFlags(config))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cp.Stop()) })
	c, ctx := cp.Client, contextBackground()

	const ns = "native-static"
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	require.NoError(t, c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spark"}}))
	// An executor holding security-baseline, which stays with the webhook, and not cost-center,
	// which the static MAP applies before the static VAP checks it.
	executor := labPod(t, "spark/executor-pod.yaml", "static-executor", nil)
	executor.Namespace = ns
	delete(executor.Labels, "cost-center")
	executor.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	for i := range executor.Spec.Containers {
		executor.Spec.Containers[i].SecurityContext = baselineContext()
	}
	const applied = "podpatch-system/spark-spot/spot-executors,podpatch-system/cost-center/cost-center"
	appliedBy := func() func() bool {
		return func() bool {
			got := executor.DeepCopy()
			if err := c.Create(ctx, got, client.DryRunAll); err != nil {
				t.Logf("executor: %v", err)
				return false
			}
			return got.Annotations[policies.AppliedAnnotation] == applied && got.Labels["cost-center"] == "data-platform" &&
				slices.ContainsFunc(got.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == "cloud.google.com/gke-spot" })
		}
	}
	require.Eventually(t, appliedBy(), 30*time.Second, 200*time.Millisecond, "the static MAPs never applied %s to a Spark executor", applied)

	t.Run("the static objects cannot be read, deleted or replaced through the API", func(t *testing.T) {
		const reserved = `names ending with ".static.k8s.io" are reserved`
		const mapName, vapName = "podpatch.spark.worker.pod.static.k8s.io", "podpatch.pod.spark.worker.static.k8s.io"
		for _, o := range []client.Object{
			&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: mapName}},
			&admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: mapName}},
			&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: vapName}},
			&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: vapName}},
		} {
			what := fmt.Sprintf("%T %s", o, o.GetName())
			require.True(t, apierrors.IsNotFound(c.Delete(ctx, o)), "%s cannot be deleted through the API", what)
			require.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(o), o)), "%s is not served through the API", what)
		}
		// Replacing the executors' MAP by one of the same name that does nothing is refused for its
		// name alone: the same MAP of another name is valid.
		mutations := []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
			JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "test", path: "/kind", value: "Pod"}]`}}}
		rules := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
			RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}}
		replace := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: mapName},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: rules, Mutations: mutations,
				ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy}}
		other := replace.DeepCopy()
		other.Name = "podpatch-static-probe"
		require.NoError(t, c.Create(ctx, other, client.DryRunAll))
		err := c.Create(ctx, replace)
		require.Error(t, err, "a MAP of a static name was created through the API")
		require.True(t, apierrors.IsInvalid(err), "%v", err)
		require.ErrorContains(t, err, reserved)
		binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: mapName},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: mapName}}
		err = c.Create(ctx, binding)
		require.Error(t, err, "a MAP binding of a static name was created through the API")
		require.ErrorContains(t, err, reserved)
		// The executor still gets the compiled policies.
		require.True(t, appliedBy()(), "after the attempts, the static MAPs still apply %s", applied)
	})

	t.Run("the second line's static VAP refuses an executor missing an enforce policy", func(t *testing.T) {
		bare := executor.DeepCopy()
		bare.Name, bare.Spec.SecurityContext = "static-bare-executor", nil
		for i := range bare.Spec.Containers {
			bare.Spec.Containers[i].SecurityContext = nil
		}
		err := c.Create(ctx, bare, client.DryRunAll)
		require.Error(t, err, "an executor without security-baseline was admitted")
		require.ErrorContains(t, err, "podpatch enforce policy podpatch-system/security-baseline/security-baseline requires")
		// Through the API server's own second line: no ValidatingAdmissionPolicy is installed.
		var vaps admissionregistrationv1.ValidatingAdmissionPolicyList
		require.NoError(t, c.List(ctx, &vaps))
		require.Empty(t, vaps.Items)
		var maps admissionregistrationv1.MutatingAdmissionPolicyList
		require.NoError(t, c.List(ctx, &maps))
		require.Empty(t, maps.Items)
	})
}
