package e2e

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
)

// warningLog collects the admission warnings a client receives.
type warningLog struct {
	mu  sync.Mutex
	all []string
}

func (w *warningLog) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, text)
}

// warnedClient is a client of the test control plane that keeps the admission warnings of what
// it sends.
func warnedClient(t *testing.T) (client.Client, *warningLog) {
	t.Helper()
	w := &warningLog{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c, w
}

func (w *warningLog) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.all
	w.all = nil
	return out
}

// TestValidInValidOut is "valid in, valid out" (reference §8) through the real webhook path: a `mode: default` platform
// policy setting priorityClassName made the Dask operator's Pods forbidden (the Priority plugin,
// run again after the webhook, refused the priority 0 they carried). Now, with a PriorityClass
// that exists, the Pod is admitted with the class's priority; with one that does not (known
// from podpatch's PriorityClass cache), that policy is left out, the others apply, and the
// admission warning names it and the rule.
func TestValidInValidOut(t *testing.T) {
	ctx := contextBackground()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-batch"}, Value: 1000}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, pc)))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), pc) })

	p := servePodpatch(t)

	c, w := warnedClient(t)

	policy := func(class string) *corev1.ConfigMap {
		docs := []string{
			"apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: batch-priority}\n" +
				"spec:\n  mode: default\n  match: {managers: [dask]}\n  template: {spec: {priorityClassName: " + class + "}}\n",
			policyYAML("pool", "nodeSelector: {pool: e2e}"),
		}
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "e2e-validity",
				Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data: map[string]string{"p.yaml": strings.Join(docs, "---\n")},
		}
	}
	cm := policy("e2e-batch")
	require.NoError(t, k8s.Create(ctx, cm))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), cm) })

	// A Pod as the Dask operator's arrive: priority already computed by the Priority plugin.
	zero := int32(0)
	worker := func(name string) *corev1.Pod {
		pod := daskWorker("default", name)
		pod.Spec.Priority = &zero
		return pod
	}
	create := func(name string) (*corev1.Pod, error) {
		pod := worker(name)
		return pod, c.Create(ctx, pod, client.DryRunAll)
	}

	var got *corev1.Pod
	require.Eventually(t, func() bool {
		pod, err := create("class-exists")
		require.NoError(t, err, "the Pod must be admitted")
		got = pod
		return pod.Spec.NodeSelector["pool"] == "e2e" && pod.Spec.PriorityClassName == "e2e-batch"
	}, 30*time.Second, 200*time.Millisecond, "the policies apply")
	require.NotNil(t, got.Spec.Priority)
	require.Equal(t, int32(1000), *got.Spec.Priority, "the class's priority")

	// A class that does not exist: the Priority plugin would refuse the Pod; the policy is left
	// out once podpatch's PriorityClass cache knows it is missing.
	cur := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(cm), cur))
	cur.Data = policy("e2e-missing").Data
	require.NoError(t, k8s.Update(ctx, cur))
	var warned []string
	require.Eventually(t, func() bool {
		w.take()
		pod, err := create("class-missing")
		require.NoError(t, err, "the Pod must be admitted")
		got, warned = pod, w.take()
		return pod.Spec.NodeSelector["pool"] == "e2e" && slices.ContainsFunc(warned, func(s string) bool {
			return strings.Contains(s, "podpatch-system/e2e-validity/batch-priority") && strings.Contains(s, validity.RulePriorityClassNotFound)
		})
	}, 30*time.Second, 200*time.Millisecond, "the policy naming a missing class is left out, with a warning")
	require.Empty(t, got.Spec.PriorityClassName)
	require.Equal(t, "podpatch-system/e2e-validity/pool", withoutVersions(t, got.Annotations[policies.AppliedAnnotation]))
	require.Positive(t, p.metricSum(t, "podpatch_policy_skipped_total"))
}

// TestEnforcedClusterIP: an enforce policy making scheduler Services ClusterIP binds a KubeRay
// head Service that asks for a load balancer or a node port, as the real API server defaults
// it (externalTrafficPolicy, allocateLoadBalancerNodePorts) and with a node port and source
// ranges the user asked for: the Service is stored ClusterIP without those fields and names the
// policy, where before the enforce policy was left out as a validity conflict and the Service
// kept its load balancer, escaping the enforced type.
func TestEnforcedClusterIP(t *testing.T) {
	ctx := contextBackground()
	servePodpatch(t)
	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-no-lb", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: no-lb}\n" +
		"spec:\n  mode: enforce\n  match: {managers: [ray], roles: [scheduler]}\n  service: {spec: {type: ClusterIP}}\n"})

	head := func(name string, typ corev1.ServiceType) *corev1.Service {
		u := readObject(t, "policies/testdata/fixtures/kuberay/head-service.yaml")
		svc := &corev1.Service{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc))
		svc.Name, svc.Namespace, svc.OwnerReferences = name, "default", nil
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.Type = "", nil, typ
		svc.Spec.Ports[0].NodePort = 30000 + int32(len(name)) // asked for by the user
		if typ == corev1.ServiceTypeLoadBalancer {
			svc.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8"}
		}
		return svc
	}
	for _, typ := range []corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort} {
		name := "e2e-head-" + strings.ToLower(string(typ))
		var stored *corev1.Service
		require.Eventually(t, func() bool {
			svc := head(name, typ)
			require.NoError(t, k8s.Create(ctx, svc, client.DryRunAll), "the Service must be admitted")
			stored = svc
			return svc.Spec.Type == corev1.ServiceTypeClusterIP
		}, 30*time.Second, 200*time.Millisecond, "%s: the enforced ClusterIP applies", typ)
		require.Empty(t, stored.Spec.ExternalTrafficPolicy, typ)
		require.Nil(t, stored.Spec.AllocateLoadBalancerNodePorts, typ)
		require.Empty(t, stored.Spec.LoadBalancerSourceRanges, typ)
		for _, port := range stored.Spec.Ports {
			require.Zero(t, port.NodePort, "%s: port %s", typ, port.Name)
		}
		require.Contains(t, withoutVersions(t, stored.Annotations[policies.AppliedAnnotation]), "podpatch-system/e2e-no-lb/no-lb", typ)
	}
}
