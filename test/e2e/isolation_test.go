package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
)

// TestIsolation goes through reference §3's isolation rules behind the real API server: a namespace
// policy setting an infrastructure annotation is refused at `kubectl apply` naming the key and
// the flag; a Pod that pre-declares the platform's sidecar is stored with the platform's
// container, none of its own command; and platform policies whose selectors oscillate still
// leave the platform's enforce policy applied, with a warning relayed to the client.
func TestIsolation(t *testing.T) {
	servePodpatch(t)
	cs, w := warningClient(t)
	create := func(t *testing.T, cm *corev1.ConfigMap) error {
		t.Helper()
		_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(contextBackground(), cm, metav1.CreateOptions{})
		if err == nil {
			t.Cleanup(func() {
				_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(contextBackground(), cm.Name, metav1.DeleteOptions{})
			})
		}
		return err
	}
	policyCM := func(ns, name, doc string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data:       map[string]string{"p.yaml": doc},
		}
	}
	dryRun := func(t *testing.T, pod *corev1.Pod) *corev1.Pod {
		t.Helper()
		out, err := cs.CoreV1().Pods(pod.Namespace).Create(contextBackground(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		return out
	}

	t.Run("a namespace policy may not open the load balancer", func(t *testing.T) {
		err := create(t, policyCM("team-a", "open-lb", "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: open-lb}\n"+
			"spec:\n  service:\n    metadata:\n      annotations: {service.beta.kubernetes.io/load-balancer-source-ranges: 0.0.0.0/0}\n"))
		require.Error(t, err)
		require.Contains(t, err.Error(), "denied the request")
		require.Contains(t, err.Error(), "spec.service.metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]")
		require.Contains(t, err.Error(), "--namespace-denied-annotations")
	})

	t.Run("a pre-declared platform sidecar is replaced", func(t *testing.T) {
		require.NoError(t, create(t, policyCM("podpatch-system", "audit-agent", "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: audit-agent}\n"+
			"spec:\n  mode: enforce\n  match: {managers: [dask]}\n  template:\n    spec:\n      containers:\n"+
			"        - {name: audit-agent, image: \"registry.example.com/audit-agent:1.4\", env: [{name: AUDIT_SINK, value: \"https://audit.example.com\"}]}\n")))
		pod := daskWorker("team-a", "predeclared")
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "audit-agent", Image: "registry.example.com/audit-agent:1.4",
			Command: []string{"sleep", "infinity"}, Env: []corev1.EnvVar{{Name: "STEAL", Value: "1"}}})
		var got corev1.Container
		require.Eventually(t, func() bool {
			stored := dryRun(t, pod)
			require.Len(t, stored.Spec.Containers, 2)
			got = stored.Spec.Containers[1]
			return got.Command == nil
		}, 30*time.Second, 200*time.Millisecond, "the pod's own command survived in the platform's sidecar")
		require.Equal(t, "audit-agent", got.Name)
		require.Equal(t, []corev1.EnvVar{{Name: "AUDIT_SINK", Value: "https://audit.example.com"}}, got.Env)
	})

	t.Run("oscillating platform selectors keep enforce", func(t *testing.T) {
		head := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\n"
		cm := policyCM("podpatch-system", "oscillating", "")
		cm.Data = map[string]string{
			"a.yaml": head + "metadata: {name: a}\nspec:\n  match: {selector: {matchExpressions: [{key: phase-b, operator: DoesNotExist}]}}\n  template: {metadata: {labels: {phase-a: \"1\"}}}\n",
			"b.yaml": head + "metadata: {name: b}\nspec:\n  match: {selector: {matchLabels: {phase-a: \"1\"}}}\n  template: {metadata: {labels: {phase-b: \"1\"}}}\n",
			"c.yaml": head + "metadata: {name: cost-center}\nspec:\n  mode: enforce\n  template: {metadata: {labels: {cost-center: ml}}}\n",
		}
		require.NoError(t, create(t, cm), "each policy is valid; lint reports the pair")
		var stored *corev1.Pod
		require.Eventually(t, func() bool {
			w.take()
			stored = dryRun(t, daskWorker("team-a", "oscillating"))
			return stored.Labels["cost-center"] == "ml"
		}, 30*time.Second, 200*time.Millisecond, "the enforce policy was dropped")
		require.NotContains(t, stored.Labels, "phase-a")
		require.NotContains(t, stored.Labels, "phase-b")
		require.Contains(t, strings.Join(w.take(), "\n"), "only the platform's enforce policies applied")
	})
}
