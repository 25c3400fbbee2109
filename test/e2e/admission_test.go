package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// daskWorker is a small Dask worker Pod in a namespace.
func daskWorker(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			"dask.org/component": "worker", "dask.org/cluster-name": "e2e", "dask.org/workergroup-name": "e2e-default"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "ghcr.io/dask/dask:latest"}}},
	}
}

// dryRunCreate asks the API server to admit a Pod without storing it and returns what it
// would store.
func dryRunCreate(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out := pod.DeepCopy()
	require.NoError(t, k8s.Create(contextBackground(), out, client.DryRunAll))
	return out
}

// TestAdmission installs podpatch from manifests/ behind the real API server and goes through
// the life of policies and objects.
func TestAdmission(t *testing.T) {
	p := servePodpatch(t)
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	p.waitForExamplesApplied(t, "default")
	for _, sa := range []struct{ ns, name string }{{"spark-jobs", "spark"}, {"default", "flink"}} {
		obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.ns, Name: sa.name}}
		require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(contextBackground(), obj)))
	}

	t.Run("every manager's objects are stored as render predicts", func(t *testing.T) {
		for _, f := range cluster.ManagerFixtures {
			obj := readObject(t, cluster.FixtureDir+f)
			want := render(t, cluster.FixtureDir+f, "manifests/examples")
			require.NotEmpty(t, want.GetAnnotations()[policies.AppliedAnnotation], "%s: the examples apply to every manager", f)
			require.NoError(t, k8s.Create(contextBackground(), obj), f)
			t.Cleanup(func() { _ = k8s.Delete(contextBackground(), obj) })
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(obj), stored), f)
			applied := stored.GetAnnotations()[policies.AppliedAnnotation]
			require.Equal(t, want.GetAnnotations()[policies.AppliedAnnotation], withoutVersions(t, applied), f)
			require.Equal(t, strings.Count(applied, ","), strings.Count(applied, "@")-1, "%s: every entry carries the ConfigMap's resourceVersion: %s", f, applied)
			requireSubset(t, normalize(t, want), normalize(t, stored), f)
		}
	})

	t.Run("an invalid policy is denied with its field path", func(t *testing.T) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "broken",
				Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data: map[string]string{"p.yaml": policyYAML("broken", "tolerations: [{key: spot, operator: Exits}]")},
		}
		err := k8s.Create(contextBackground(), cm)
		require.Error(t, err)
		require.Contains(t, err.Error(), "denied the request")
		require.Contains(t, err.Error(), "team-a/broken: p.yaml: broken: spec.template.spec.tolerations[0].operator: Unsupported value")
	})

	t.Run("a policy changes, breaks and goes away", func(t *testing.T) {
		cm := createPolicies(t, "team-a", "team-label", map[string]string{"p.yaml": policyYAML("team", "nodeSelector: {pool: v1}")}) // deleted below unless a step fails
		pool := func() string { return dryRunCreate(t, daskWorker("team-a", "w")).Spec.NodeSelector["pool"] }
		require.Eventually(t, func() bool { return pool() == "v1" }, 20*time.Second, 100*time.Millisecond)

		cm.Data["p.yaml"] = policyYAML("team", "nodeSelector: {pool: v2}")
		require.NoError(t, k8s.Update(contextBackground(), cm))
		require.Eventually(t, func() bool { return pool() == "v2" }, 20*time.Second, 100*time.Millisecond, "changed policy applied")

		// A broken version gets in only while policies are not validated (podpatch down, or the
		// validating webhook removed): the last good version stays in force, and an Event says why.
		require.NoError(t, k8s.Delete(contextBackground(), p.vwc))
		require.Eventually(t, func() bool {
			cur := &corev1.ConfigMap{}
			require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(cm), cur))
			cur.Data["p.yaml"] = policyYAML("team", "nodeSelector: {pool: [not, a, string]}")
			return k8s.Update(contextBackground(), cur) == nil
		}, 20*time.Second, 200*time.Millisecond, "the broken version is stored once the validating webhook is gone")
		require.Eventually(t, func() bool {
			events := &corev1.EventList{}
			require.NoError(t, k8s.List(contextBackground(), events, client.InNamespace("team-a")))
			for _, e := range events.Items {
				if e.InvolvedObject.Name == "team-label" && e.Reason == "InvalidPolicy" && e.Type == corev1.EventTypeWarning &&
					strings.Contains(e.Message, "spec.template.spec.nodeSelector") {
					return true
				}
			}
			return false
		}, 20*time.Second, 200*time.Millisecond, "InvalidPolicy event")
		require.Equal(t, "v2", pool(), "last good version still applied")
		// The Event is sent when the ConfigMap is compiled, the gauge set when the snapshot is
		// published, up to PublishDelay later.
		require.Eventually(t, func() bool { return p.metricSum(t, "podpatch_policy_configmaps_invalid") > 0 },
			10*time.Second, 50*time.Millisecond)

		require.NoError(t, k8s.Delete(contextBackground(), cm))
		require.Eventually(t, func() bool { return pool() == "" }, 20*time.Second, 100*time.Millisecond, "deleted policy stops")
		require.Zero(t, p.metricSum(t, "podpatch_policy_configmaps_invalid"))
	})

	t.Run("objects outside the selectors never reach podpatch", func(t *testing.T) {
		before := p.requests(t)
		system := daskWorker("kube-system", "dask-in-kube-system")
		require.NoError(t, k8s.Create(contextBackground(), system))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), system) })
		web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx"}}}}
		require.NoError(t, k8s.Create(contextBackground(), web))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), web) })
		require.Equal(t, before, p.requests(t), "kube-system and unlabelled pods are filtered by the API server")
		require.Empty(t, system.Annotations[policies.AppliedAnnotation])
		require.Empty(t, web.Annotations)

		// A Service that passes the Flink objectSelector but selects no Flink pod: podpatch is
		// asked, recognises nothing, and the Service is stored as it was sent.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-flink",
			Labels: map[string]string{"type": "flink-native-kubernetes"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		require.NoError(t, k8s.Create(contextBackground(), svc))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), svc) })
		require.Equal(t, before+1, p.requests(t))
		require.Empty(t, svc.Annotations)
		require.Equal(t, map[string]string{"type": "flink-native-kubernetes"}, svc.Labels)
	})

	t.Run("server-side dry run is patched and not stored", func(t *testing.T) {
		pod := dryRunCreate(t, daskWorker("default", "dry"))
		require.Contains(t, pod.Annotations[policies.AppliedAnnotation], "podpatch-system/cost-center/cost-center")
		require.Equal(t, "data-platform", pod.Labels["cost-center"])
		err := k8s.Get(contextBackground(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
		require.True(t, apierrors.IsNotFound(err), "dry run stores nothing: %v", err)
	})

	t.Run("podpatch down: Ignore creates unpatched pods, Fail refuses them", func(t *testing.T) {
		p.stop(t)
		pod := daskWorker("default", "while-down")
		require.NoError(t, k8s.Create(contextBackground(), pod), "failurePolicy Ignore")
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pod) })
		require.Empty(t, pod.Annotations[policies.AppliedAnnotation], "created unpatched")

		cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
		require.NoError(t, k8s.Get(contextBackground(), client.ObjectKeyFromObject(p.mwc), cur))
		fail := admissionregistrationv1.Fail
		for i := range cur.Webhooks {
			cur.Webhooks[i].FailurePolicy = &fail
		}
		require.NoError(t, k8s.Update(contextBackground(), cur))
		require.Eventually(t, func() bool {
			err := k8s.Create(contextBackground(), daskWorker("default", "refused"), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), `failed calling webhook "dask.podpatch.io"`)
		}, 20*time.Second, 200*time.Millisecond, "with failurePolicy Fail the create fails, naming the webhook")
	})
}

// policyYAML is a platform-independent PodTemplatePatch setting one pod spec field.
func policyYAML(name, specField string) string {
	return "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name + "}\n" +
		"spec:\n  match: {managers: [dask]}\n  template:\n    spec:\n      " + specField + "\n"
}
