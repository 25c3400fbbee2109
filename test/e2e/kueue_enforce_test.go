package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/kueue"
)

// TestKueueLabelsDoNotEscapeEnforce: on a cluster without Kueue (the test control plane serves
// no kueue.x-k8s.io API), a Pod whose creator labelled it as Kueue's
// (kueue.x-k8s.io/managed, kueue.x-k8s.io/queue-name) is stored with the platform's enforced
// nodeSelector and toleration, and the merged zone too: a label proves nothing, no Kueue runs to
// decide its placement, and no kueue-placement-conflict warning is given (reference §8;
// such a label once escaped the enforced placement while podpatch.io/applied named the policy). A Pod
// that also carries Kueue's admission gate counts as unknown (Kueue's webhook may have come since
// the last discovery): the enforced placement is stored, the merged zone left out, with a warning.
func TestKueueLabelsDoNotEscapeEnforce(t *testing.T) {
	servePodpatch(t)
	cs, w := warningClient(t)
	const ns = "team-a"
	policy := func(name, mode, spec string) string {
		return "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name + "}\n" +
			"spec:\n  mode: " + mode + "\n  match: {managers: [dask]}\n  template:\n    spec:\n" + spec
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "kueue-enforce", Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{
			"enforce.yaml": policy("pool", "enforce", "      nodeSelector: {pool: cpu}\n"+
				"      tolerations: [{key: dedicated, operator: Equal, value: cpu, effect: NoSchedule}]\n"),
			"merge.yaml": policy("zone", "merge", "      nodeSelector: {topology.kubernetes.io/zone: zone-a}\n"),
		},
	}
	_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(contextBackground(), cm, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(contextBackground(), cm.Name, metav1.DeleteOptions{})
	})

	labelled := func(name string) *corev1.Pod {
		pod := daskWorker(ns, name)
		pod.Labels[kueue.ManagedLabel] = "true"
		pod.Labels[kueue.QueueLabel] = "user-queue"
		pod.Spec.NodeSelector = map[string]string{"pool": "gpu"} // the placement the user wants
		return pod
	}
	enforced := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cpu", Effect: corev1.TaintEffectNoSchedule}
	const zone = "topology.kubernetes.io/zone"
	// podpatch serves both policies (a dry run stores nothing)...
	require.Eventually(t, func() bool {
		out, err := cs.CoreV1().Pods(ns).Create(contextBackground(), daskWorker(ns, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		return out.Spec.NodeSelector["pool"] == "cpu" && out.Spec.NodeSelector[zone] == "zone-a"
	}, 30*time.Second, 200*time.Millisecond, "podpatch never applied the policies")
	// ...and has heard from discovery that no Kueue runs (the merged zone applies). Before that,
	// too, the enforced pool is never escaped.
	var escaped map[string]string
	require.Eventually(t, func() bool {
		out, err := cs.CoreV1().Pods(ns).Create(contextBackground(), labelled("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false
		}
		if out.Spec.NodeSelector["pool"] != "cpu" {
			escaped = out.Spec.NodeSelector
			return true
		}
		return out.Spec.NodeSelector[zone] == "zone-a"
	}, 30*time.Second, 200*time.Millisecond, "podpatch never learnt that no Kueue runs")
	require.Nil(t, escaped, "a Kueue label escaped the enforced pool")
	create := func(t *testing.T, pod *corev1.Pod) (*corev1.Pod, string) {
		t.Helper()
		w.take()
		_, err := cs.CoreV1().Pods(ns).Create(contextBackground(), pod, metav1.CreateOptions{})
		require.NoError(t, err)
		warned := strings.Join(w.take(), "\n")
		t.Cleanup(func() {
			_ = cs.CoreV1().Pods(ns).Delete(contextBackground(), pod.Name, metav1.DeleteOptions{})
		})
		stored, err := cs.CoreV1().Pods(ns).Get(contextBackground(), pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		return stored, warned
	}

	t.Run("labelled as Kueue's: stored with the enforced placement", func(t *testing.T) {
		stored, warned := create(t, labelled("kueue-labelled"))
		require.Equal(t, map[string]string{"pool": "cpu", zone: "zone-a"}, stored.Spec.NodeSelector)
		require.Contains(t, stored.Spec.Tolerations, enforced)
		require.Contains(t, stored.Annotations[policies.AppliedAnnotation], "kueue-enforce/pool")
		require.NotContains(t, warned, "kueue-placement-conflict")
	})

	t.Run("with Kueue's admission gate too: the enforced placement stays, the merged is left out", func(t *testing.T) {
		pod := labelled("kueue-gated")
		pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: kueue.AdmissionGate}}
		stored, warned := create(t, pod)
		require.Equal(t, map[string]string{"pool": "cpu"}, stored.Spec.NodeSelector)
		require.Contains(t, stored.Spec.Tolerations, enforced)
		require.Contains(t, warned, "kueue-placement-conflict")
		require.Contains(t, warned, zone)
	})
}
