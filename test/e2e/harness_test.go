package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/test/cluster"
)

// The test-facing side of test/cluster: the same operations, failing the test on error.

func contextBackground() context.Context { return context.Background() }

// heldPort holds a loopback port until the test ends (cluster.HoldPort), for a podpatch that
// must be named in configurations before it starts, or restarted on the same port.
func heldPort(t testing.TB) int {
	t.Helper()
	h, err := cluster.HoldPort()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, h.Release()) })
	return h.Port
}

// podpatchProcess is `podpatch serve` running against the test control plane.
type podpatchProcess struct {
	*cluster.Podpatch
	certDir string
	stopped bool
	// mwc and vwc are the webhook configurations servePodpatch installed in front of it.
	mwc *admissionregistrationv1.MutatingWebhookConfiguration
	vwc *admissionregistrationv1.ValidatingWebhookConfiguration
}

// servingCerts writes a CA and a serving certificate valid for "localhost" and returns the
// directory and the CA.
func servingCerts(t testing.TB) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	ca, err := cluster.ServingCerts(dir)
	require.NoError(t, err)
	return dir, ca
}

// startPodpatch runs the podpatch binary (`serve`) on free loopback ports and waits until it
// is ready. It is stopped (SIGTERM, exit status 0 expected) when the test ends.
func startPodpatch(t testing.TB, certDir string, extra ...string) *podpatchProcess {
	t.Helper()
	return startPodpatchOnPort(t, 0, certDir, extra...)
}

// servePodpatch starts podpatch (startPodpatch, with extra flags) on a new serving certificate
// behind the base manifests' webhook configurations, installed until the test ends.
func servePodpatch(t testing.TB, extra ...string) *podpatchProcess {
	t.Helper()
	certDir, ca := servingCerts(t)
	p := startPodpatch(t, certDir, extra...)
	p.mwc, p.vwc = webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	installWebhooks(t, p.mwc, p.vwc)
	return p
}

// startPodpatchOnPort is startPodpatch with the webhook port held by the caller (heldPort; 0:
// any), for configurations that must name the URL before podpatch starts.
func startPodpatchOnPort(t testing.TB, port int, certDir string, extra ...string) *podpatchProcess {
	t.Helper()
	return startPodpatchAs(t, kubeconfig, port, certDir, extra...)
}

// startPodpatchAs is startPodpatchOnPort with the API server identity of a kubeconfig.
func startPodpatchAs(t testing.TB, kubeconfig string, port int, certDir string, extra ...string) *podpatchProcess {
	t.Helper()
	pp, err := cluster.StartPodpatch(podpatchBin, kubeconfig, certDir, port, extra...)
	require.NoError(t, err)
	p := &podpatchProcess{Podpatch: pp, certDir: certDir}
	t.Cleanup(func() {
		if !p.stopped {
			p.stop(t)
		}
		if t.Failed() {
			t.Logf("podpatch output:\n%s", p.Output.String())
		}
	})
	return p
}

// stop sends SIGTERM and expects a clean exit.
func (p *podpatchProcess) stop(t testing.TB) {
	t.Helper()
	p.stopped = true
	require.NoError(t, p.Stop(), "podpatch must exit 0 on SIGTERM:\n%s", p.Output)
}

// url is where the API server reaches this podpatch.
func (p *podpatchProcess) url() string { return p.URL() }

// requests sums podpatch_admission_requests_total over every label set.
func (p *podpatchProcess) requests(t testing.TB) float64 {
	t.Helper()
	return p.metricSum(t, "podpatch_admission_requests_total")
}

func (p *podpatchProcess) metricSum(t testing.TB, name string) float64 {
	t.Helper()
	v, err := p.MetricSum(name)
	require.NoError(t, err)
	return v
}

// kustomizeBuild builds a kustomization of the repository with the kustomize Go API.
func kustomizeBuild(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := cluster.Kustomize(filepath.Join(repoRoot, dir))
	require.NoError(t, err)
	return objs
}

// webhookConfigurations picks the webhook configurations out of built manifests and rewrites
// only their client config (caBundle nil keeps the manifests' own).
func webhookConfigurations(t testing.TB, objs []*unstructured.Unstructured, url string, caBundle []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	mwc, vwc, err := cluster.WebhookConfigurations(objs, url, caBundle)
	require.NoError(t, err)
	return mwc, vwc
}

// installWebhooks creates the configurations and removes them when the test ends.
func installWebhooks(t testing.TB, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		require.NoError(t, k8s.Create(contextBackground(), o))
		t.Cleanup(func() {
			if err := k8s.Delete(contextBackground(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		})
	}
}

// createPolicies creates a policy ConfigMap (policyConfigMap) and deletes it when the test ends.
func createPolicies(t *testing.T, namespace, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := policyConfigMap(namespace, name, data)
	require.NoError(t, k8s.Create(contextBackground(), cm))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), cm) })
	return cm
}

// createPod creates pod, deleted when the test ends, and reads back what the API server stored.
func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	require.NoError(t, k8s.Create(contextBackground(), pod))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod) })
	stored := &corev1.Pod{}
	require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(pod), stored))
	return stored
}

// applyManifests creates (or updates) objects from built manifests and deletes them when the
// test ends.
func applyManifests(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	require.NoError(t, cluster.Apply(contextBackground(), k8s, objs))
	for _, o := range objs {
		t.Cleanup(func() {
			if err := k8s.Delete(contextBackground(), o.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		})
	}
}

// readObject reads a YAML file of the repository as an unstructured object.
func readObject(t testing.TB, path string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	require.NoError(t, err)
	return fromYAML(t, b)
}

func fromYAML(t testing.TB, b []byte) *unstructured.Unstructured {
	t.Helper()
	js, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(js))
	return u
}

// render runs `podpatch render` on a file with the given policies, as a platform engineer would.
func render(t *testing.T, file string, policyPaths ...string) *unstructured.Unstructured {
	t.Helper()
	args := []string{"render", "-f", filepath.Join(repoRoot, file)}
	for _, p := range policyPaths {
		args = append(args, "--policies", filepath.Join(repoRoot, p))
	}
	out, err := execOutput(podpatchBin, args...)
	require.NoError(t, err)
	return fromYAML(t, out)
}

// normalize returns a copy of the object's fields with resource quantities in canonical form.
func normalize(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	c := u.DeepCopy()
	if ann := c.GetAnnotations(); ann[policies.AppliedAnnotation] != "" {
		ann[policies.AppliedAnnotation] = withoutVersions(t, ann[policies.AppliedAnnotation])
		c.SetAnnotations(ann)
	}
	m := c.Object
	require.NoError(t, cluster.CanonicalQuantities(m))
	return m
}

// withoutVersions drops the @<resourceVersion> the webhook adds to every provenance entry
// (render, reading files, has none), checking that each stored entry carries one.
func withoutVersions(t *testing.T, applied string) string {
	t.Helper()
	out, err := cluster.WithoutVersions(applied)
	require.NoError(t, err)
	return out
}

// requireSubset checks that every field of want is in what the API server stored (which adds
// defaults and drops zero values), naming the first path that differs.
func requireSubset(t *testing.T, want, got any, path string) {
	t.Helper()
	w, isMap := want.(map[string]any)
	if !isMap {
		require.True(t, cluster.Subset(want, got), "%s: %v not in stored %v", path, want, got)
		return
	}
	g, ok := got.(map[string]any)
	require.True(t, ok, "%s: want an object, stored %T", path, got)
	for k, wv := range w {
		if path != "" && k == "status" {
			continue
		}
		gv, present := g[k]
		if !present && cluster.IsZero(wv) {
			continue
		}
		require.True(t, present, "%s.%s: missing from the stored object", path, k)
		requireSubset(t, wv, gv, path+"."+k)
	}
}

// waitForExamples waits until podpatch serves every policy of manifests/examples.
func (p *podpatchProcess) waitForExamples(t testing.TB) {
	t.Helper()
	want := examplePolicyCount(t)
	require.Eventually(t, func() bool { return p.metricSum(t, "podpatch_policies") == want },
		30*time.Second, 100*time.Millisecond, "podpatch never saw the %v example policies", want)
}

// waitForExamplesApplied is waitForExamples, then waits until the API server calls podpatch
// for a Dask worker of a namespace and gets it patched.
func (p *podpatchProcess) waitForExamplesApplied(t *testing.T, namespace string) {
	t.Helper()
	p.waitForExamples(t)
	require.Eventually(t, func() bool {
		return dryRunCreate(t, daskWorker(namespace, "probe")).Annotations[policies.AppliedAnnotation] != ""
	}, 30*time.Second, 200*time.Millisecond, "the API server never called podpatch")
}

// examplePolicyCount is how many policies manifests/examples holds, as podpatch_policies counts them.
func examplePolicyCount(t testing.TB) float64 {
	t.Helper()
	cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join(repoRoot, "manifests", "examples")}, "default", nil)
	require.NoError(t, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(t, probs)
	return float64(set.Count(policies.ScopePlatform) + set.Count(policies.ScopeNamespace))
}
