package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

const updatesNamespace = "e2e-updates"

// updatesPolicy is the platform's enforce policy of TestEnforceOnUpdates: Dask scheduler
// Services internal and ClusterIP, a cost label and no privilege escalation on Dask Pods.
const updatesPolicy = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: baseline}\nspec:\n  mode: enforce\n" +
	"  match: {managers: [dask], namespaces: [" + updatesNamespace + "]}\n" +
	"  template:\n    metadata: {labels: {cost-center: data-platform}}\n" +
	"    spec:\n      containers: [{name: '*', resources: {limits: {memory: 4Gi}}, securityContext: {allowPrivilegeEscalation: false}}]\n" +
	"  service:\n    metadata: {annotations: {networking.gke.io/load-balancer-type: Internal}}\n    spec: {type: ClusterIP}\n"

// updatesGPUPolicy puts the Dask Pods labelled pool: gpu on the GPU nodes: a label an update
// adds selects it, and a running Pod's nodeSelector cannot change.
const updatesGPUPolicy = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: gpu}\nspec:\n  mode: enforce\n" +
	"  match: {managers: [dask], namespaces: [" + updatesNamespace + "], selector: {matchLabels: {pool: gpu}}}\n" +
	"  template:\n    spec: {nodeSelector: {pool: gpu}}\n"

// TestEnforceOnUpdates is reference §5's "Enforce on updates" through the real API server: the
// write paths that used to undo an enforce policy after admission — a Service patched to
// LoadBalancer or stripped of its internal-LB annotation, a Pod's enforced label removed, a
// container resized (pods/resize), an ephemeral container added by `kubectl debug` — store the
// enforced values (a warning says so), or are refused when they cannot hold them (a privileged
// debug container); an enforce policy added since, which the object did not hold, is not
// applied to its update and does not switch off the one it held.
func TestEnforceOnUpdates(t *testing.T) {
	ctx := contextBackground()
	ensureNamespace(t, updatesNamespace)
	servePodpatch(t)
	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-updates", map[string]string{"p.yaml": updatesPolicy, "gpu.yaml": updatesGPUPolicy})
	const ref = "podpatch-system/e2e-updates/baseline"
	worker := func(name string) *corev1.Pod {
		pod := labPod(t, "dask-operator/worker-pod.yaml", name, nil)
		pod.Namespace = updatesNamespace
		return pod
	}
	// service creates the Dask operator's scheduler Service under name (deleted at cleanup).
	service := func(t *testing.T, name string) *unstructured.Unstructured {
		u := readObject(t, cluster.FixtureDir+"dask-operator/scheduler-service.yaml")
		u.SetNamespace(updatesNamespace)
		u.SetName(name)
		u.SetResourceVersion("")
		u.SetOwnerReferences(nil)
		require.NoError(t, k8s.Create(ctx, u))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), u) })
		return u
	}
	require.Eventually(t, func() bool {
		return dryRunCreate(t, worker("probe")).Labels["cost-center"] == "data-platform"
	}, 30*time.Second, 200*time.Millisecond, "podpatch never served the policy")
	c, warnings := warnedClient(t)

	t.Run("a Service patched to LoadBalancer, its annotation removed", func(t *testing.T) {
		svc := &corev1.Service{}
		u := service(t, "updates-lb")
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(u), svc))
		require.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
		require.Equal(t, "Internal", svc.Annotations["networking.gke.io/load-balancer-type"])

		warnings.take()
		patch := `{"metadata":{"annotations":{"networking.gke.io/load-balancer-type":null}},"spec":{"type":"LoadBalancer"}}`
		require.NoError(t, c.Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(patch))))
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(u), svc))
		require.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, "stored as the enforce policy sets it")
		require.Equal(t, "Internal", svc.Annotations["networking.gke.io/load-balancer-type"])
		require.Regexp(t, regexp.QuoteMeta(ref)+`@\d+ hold on every update; what this update undid of them was put back`, strings.Join(warnings.take(), "\n"))
	})

	t.Run("a Service relabelled out of recognition", func(t *testing.T) {
		u := service(t, "relabelled-scheduler")
		patch := `{"metadata":{"labels":{"dask.org/component":null}},"spec":{"type":"LoadBalancer","selector":{"dask.org/component":null}}}`
		err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch)))
		require.Error(t, err)
		require.Regexp(t, regexp.QuoteMeta(ref)+`@\d+: metadata.labels: this update makes a dask scheduler an object no profile recognises: .*\(identity-changed\)`, err.Error())
		svc := &corev1.Service{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(u), svc))
		require.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	})

	t.Run("a Pod's enforced label removed", func(t *testing.T) {
		pod := worker("updates-label")
		require.NoError(t, k8s.Create(ctx, pod))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0)) })
		require.Equal(t, "data-platform", pod.Labels["cost-center"])
		require.NoError(t, c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"cost-center":null,"team":"mine"}}}`))))
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Equal(t, "data-platform", stored.Labels["cost-center"])
		require.Equal(t, "mine", stored.Labels["team"], "what the update may change stays changed")
	})

	t.Run("a label that newly selects an enforce policy", func(t *testing.T) {
		pod := worker("updates-newly-selected")
		require.NoError(t, k8s.Create(ctx, pod))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0)) })
		require.Empty(t, pod.Spec.NodeSelector)
		warnings.take()
		// The API server would refuse the update if podpatch added the nodeSelector.
		require.NoError(t, c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pool":"gpu"}}}`))))
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Equal(t, "gpu", stored.Labels["pool"])
		require.Empty(t, stored.Spec.NodeSelector)
		require.Regexp(t, `does not hold the platform's enforce policies podpatch-system/e2e-updates/gpu@\d+ \(selected only by the labels this update writes\)`, strings.Join(warnings.take(), "\n"))
	})

	t.Run("a container resized beyond the enforced limit", func(t *testing.T) {
		pod := worker("updates-resize")
		require.NoError(t, k8s.Create(ctx, pod))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0)) })
		require.Equal(t, "4Gi", pod.Spec.Containers[0].Resources.Limits.Memory().String())
		resized := pod.DeepCopy()
		resized.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("16Gi")
		require.NoError(t, c.SubResource("resize").Update(ctx, resized))
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Equal(t, "4Gi", stored.Spec.Containers[0].Resources.Limits.Memory().String(), "pods/resize cannot raise the enforced limit")
	})

	t.Run("kubectl debug", func(t *testing.T) {
		pod := worker("updates-debug")
		require.NoError(t, k8s.Create(ctx, pod))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod, client.GracePeriodSeconds(0)) })
		kubectl := func(args ...string) (string, error) {
			cmd := exec.Command(filepath.Join(repoRoot, "bin", "kubectl"), append([]string{"--kubeconfig", kubeconfig, "-n", updatesNamespace}, args...)...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		out, err := kubectl("debug", pod.Name, "--image=busybox", "--container=debugger", "--profile=general", "--attach=false")
		require.NoError(t, err, out)
		require.Contains(t, out, "what this ephemeral container undid of them was put back")
		stored := &corev1.Pod{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Len(t, stored.Spec.EphemeralContainers, 1)
		sc := stored.Spec.EphemeralContainers[0].SecurityContext
		require.NotNil(t, sc)
		require.NotNil(t, sc.AllowPrivilegeEscalation)
		require.False(t, *sc.AllowPrivilegeEscalation, "the enforced baseline holds on the debug container")

		out, err = kubectl("debug", pod.Name, "--image=busybox", "--container=root-shell", "--profile=sysadmin", "--attach=false")
		require.Error(t, err, out)
		require.Regexp(t, regexp.QuoteMeta(ref)+`@\d+: `+regexp.QuoteMeta("spec.ephemeralContainers[root-shell].securityContext: cannot set `allowPrivilegeEscalation` to false and `privileged` to true"), out)
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), stored))
		require.Len(t, stored.Spec.EphemeralContainers, 1, "the privileged container was not added")
	})

	// Last: the policy it adds would bind the Pods of the subtests above.
	t.Run("an enforce policy added since does not switch off the one the object held", func(t *testing.T) {
		u := service(t, "held-before-later")
		later := policyConfigMap(policies.DefaultPlatformNamespace, "e2e-updates-later", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: later}\nspec:\n  mode: enforce\n" +
			"  match: {managers: [dask], namespaces: [" + updatesNamespace + "]}\n" +
			"  service:\n    metadata: {annotations: {platform.example.com/later: 'yes'}}\n"})
		require.NoError(t, k8s.Create(ctx, later))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), later) })
		probe := u.DeepCopy()
		probe.SetName("later-probe")
		require.Eventually(t, func() bool {
			o := probe.DeepCopy()
			return k8s.Create(ctx, o, client.DryRunAll) == nil && o.GetAnnotations()["platform.example.com/later"] == "yes"
		}, 30*time.Second, 200*time.Millisecond, "podpatch never served the policy added since")

		warnings.take()
		svc := &corev1.Service{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(u), svc))
		require.NoError(t, c.Patch(ctx, svc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"type":"LoadBalancer"}}`))))
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(u), svc))
		require.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type, "the policy the Service held is put back")
		require.NotContains(t, svc.Annotations, "platform.example.com/later", "the one it did not hold is not applied to an update")
		got := strings.Join(warnings.take(), "\n")
		require.Regexp(t, regexp.QuoteMeta(ref)+`@\d+ hold on every update`, got)
		require.Regexp(t, `does not hold the platform's enforce policies podpatch-system/e2e-updates-later/later@\d+ \(metadata\.annotations\.platform\.example\.com/later: the policy sets it, the object lacks it\)`, got)
	})
}

// BenchmarkServiceUpdate is what watching updates costs a write (reference §5, "Enforce on
// updates"): one merge patch of a recognised Dask scheduler Service's label through the real
// API server, with no webhook, with podpatch's configurations and the example policies (the
// Service held its enforce policies: both objects checked, nothing put back), and with the
// second line's policies as well. The differences are podpatch's and the second line's on the
// update path.
//
//	PODPATCH_E2E=required go test ./test/e2e -run '^$' -bench ServiceUpdate -benchtime 300x
func BenchmarkServiceUpdate(b *testing.B) {
	ctx := contextBackground()
	const ns = "bench-updates"
	require.NoError(b, client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})))
	u := readObject(b, cluster.FixtureDir+"dask-operator/scheduler-service.yaml")
	u.SetNamespace(ns)
	u.SetResourceVersion("")
	u.SetOwnerReferences(nil)
	run := func(b *testing.B) {
		obj := u.DeepCopy()
		require.NoError(b, k8s.Create(ctx, obj))
		defer func() { _ = k8s.Delete(contextBackground(), obj) }()
		i := 0
		b.ResetTimer()
		for b.Loop() {
			i++
			patch := `{"metadata":{"labels":{"release":"r` + strconv.Itoa(i) + `"}}}`
			if err := k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("webhook=none", run)
	withPodpatch := func(b *testing.B) {
		certDir, ca := servingCerts(b)
		p := startPodpatch(b, certDir)
		applyManifests(b, kustomizeBuild(b, "manifests/examples"))
		p.waitForExamples(b)
		mwc, vwc := webhookConfigurations(b, kustomizeBuild(b, "manifests/base"), p.url(), ca)
		installWebhooks(b, mwc, vwc)
		before := p.requests(b)
		run(b)
		require.GreaterOrEqual(b, p.requests(b)-before, float64(b.N), "every update went through podpatch")
	}
	b.Run("webhook=podpatch", withPodpatch)
	// The second line's policies evaluated by the API server on each update too (old and new
	// object), once it has loaded them: it denies the unpatched Service before podpatch runs.
	b.Run("webhook=podpatch,second-line", func(b *testing.B) {
		installSecondLine(b, secondLineFromCommand(b, "manifests/examples"), ns)
		bare := u.DeepCopy()
		bare.SetName("second-line-loaded")
		require.Eventually(b, func() bool { return k8s.Create(ctx, bare.DeepCopy(), client.DryRunAll) != nil },
			30*time.Second, 200*time.Millisecond, "the second line never denied the unpatched Service")
		withPodpatch(b)
	})
}
