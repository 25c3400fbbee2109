package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/ownerevents"
)

// sparkPod is a Pod of spark-submit's: the driver of an application, or one of its executors
// (owned by the driver Pod).
func sparkPod(ns, name, app string, driver *corev1.Pod) *corev1.Pod {
	role, container := "driver", "spark-kubernetes-driver"
	var owners []metav1.OwnerReference
	if driver != nil {
		role, container = "executor", "spark-kubernetes-executor"
		owners = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: driver.Name, UID: driver.UID, Controller: new(true)}}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners,
		Labels: map[string]string{"spark-role": role, "spark-app-name": app, "spark-app-selector": "spark-" + app}},
		Spec: corev1.PodSpec{ServiceAccountName: "spark", Containers: []corev1.Container{{Name: container, Image: "apache/spark:4.0.1"}}}}
}

// plainPod is a Pod no webhook sends to podpatch (no manager's labels), someone else's.
func plainPod(ns, name string, owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
}

// podpatchEvents are the Events podpatch wrote on the object of a kind and name.
func podpatchEvents(t *testing.T, ns, kind, name string) []corev1.Event {
	t.Helper()
	l := &corev1.EventList{}
	require.NoError(t, k8s.List(contextBackground(), l, client.InNamespace(ns)))
	var out []corev1.Event
	for _, e := range l.Items {
		if e.Source.Component == "podpatch" && e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// appliedCount reads, from the PoliciesApplied Events of a role, the most objects one states;
// -1 when none does.
func appliedCount(evs []corev1.Event, role string) int {
	re := regexp.MustCompile(`to (\d+) Pods? \(role ` + role + `\b`)
	most := -1
	for _, e := range evs {
		if m := re.FindStringSubmatch(e.Message); e.Reason == ownerevents.EventPoliciesApplied && m != nil {
			n, _ := strconv.Atoi(m[1])
			most = max(most, n)
		}
	}
	return most
}

// TestOwnerEventsOnlyOnAdmittedObjects: podpatch is called before the API server stores a
// Pod, and the create can fail after it. A Spark driver Pod whose create is refused as
// AlreadyExists (someone else's Pod has its name) puts no Event on that other Pod; an executor
// refused as AlreadyExists, or refused by a ValidatingAdmissionPolicy after podpatch admitted
// it, is not counted on its driver. The driver and the executor stored as admitted get their
// PoliciesApplied, on the driver's UID (webhook/ownerevents, "Only objects that were stored").
// Before the object was read back, the other Pod got "PoliciesApplied to 1 Pod" and the driver
// counted 3 executors.
func TestOwnerEventsOnlyOnAdmittedObjects(t *testing.T) {
	ctx := contextBackground()
	const ns = "e2e-owner-events-admitted"
	ensureNamespace(t, ns)
	p := servePodpatch(t, "--owner-events-window", "500ms")
	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-owner-events-admitted", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\n" +
		"kind: PodTemplatePatch\nmetadata: {name: team}\nspec:\n  match: {managers: [spark], namespaces: [" + ns + "]}\n" +
		"  template: {metadata: {labels: {team: a}}}\n"})
	require.Eventually(t, func() bool { // dry runs: never offered for Events
		return dryRunCreate(t, sparkPod(ns, "probe-driver", "probe", nil)).Labels["team"] == "a"
	}, 30*time.Second, 200*time.Millisecond, "podpatch never served the policy")

	// Someone else's Pod holds the name a driver will be created under.
	taken := plainPod(ns, "spark-pi-driver")
	require.NoError(t, k8s.Create(ctx, taken))
	driver := sparkPod(ns, "spark-pi-2-driver", "spark-pi-2", nil)
	require.NoError(t, k8s.Create(ctx, driver))
	require.Equal(t, "a", driver.Labels["team"], "patched by podpatch")
	takenExec := plainPod(ns, "spark-pi-2-exec-2", metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: driver.Name, UID: driver.UID})
	require.NoError(t, k8s.Create(ctx, takenExec))

	// A later admission step refuses the third executor.
	refused := "spark-pi-2-exec-3"
	fail := admissionregistrationv1.Fail
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-refuse-exec-3"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != '" + refused + "'", Message: "refused after podpatch"}}}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-refuse-exec-3"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	for _, o := range []client.Object{vap, binding} {
		require.NoError(t, k8s.Create(ctx, o))
		t.Cleanup(func() { _ = k8s.Delete(contextBackground(), o) })
	}
	require.Eventually(t, func() bool {
		return k8s.Create(ctx, sparkPod(ns, refused, "spark-pi-2", driver), client.DryRunAll) != nil
	}, 30*time.Second, 200*time.Millisecond, "the ValidatingAdmissionPolicy never refused")

	began := time.Now()
	err := k8s.Create(ctx, sparkPod(ns, taken.Name, "spark-pi", nil))
	require.True(t, apierrors.IsAlreadyExists(err), "%v", err)
	err = k8s.Create(ctx, sparkPod(ns, takenExec.Name, "spark-pi-2", driver))
	require.True(t, apierrors.IsAlreadyExists(err), "%v", err)
	err = k8s.Create(ctx, sparkPod(ns, refused, "spark-pi-2", driver))
	require.Error(t, err)
	require.Contains(t, err.Error(), "refused after podpatch")
	exec := sparkPod(ns, "spark-pi-2-exec-1", "spark-pi-2", driver)
	require.NoError(t, k8s.Create(ctx, exec))
	require.Equal(t, "a", exec.Labels["team"], "patched by podpatch")

	// The driver and its one stored executor get their Events; the two AlreadyExists are
	// settled at once as not stored.
	var seen []string
	require.Eventually(t, func() bool {
		evs := podpatchEvents(t, ns, "Pod", driver.Name)
		dropped, err := p.MetricSum("podpatch_events_dropped_total")
		require.NoError(t, err)
		seen = append(eventLines(evs), eventLines(podpatchEvents(t, ns, "Pod", taken.Name))...)
		seen = append(seen, fmt.Sprintf("dropped: %v", dropped))
		return appliedCount(evs, "scheduler") == 1 && appliedCount(evs, "worker") == 1 && dropped >= 2
	}, 20*time.Second, 100*time.Millisecond, "PoliciesApplied on the driver for it and one executor, and two admissions not stored; seen %q", &seen)
	reasons, err := p.MetricLabels("podpatch_events_dropped_total", "reason")
	require.NoError(t, err)
	require.Equal(t, []string{"not_stored"}, reasons)
	for _, e := range podpatchEvents(t, ns, "Pod", driver.Name) {
		require.Equal(t, driver.UID, e.InvolvedObject.UID, "%s: %s", e.Reason, e.Message)
	}

	// The refused executor is settled once podpatch stops waiting for it to be stored; until
	// then, and after, it is counted nowhere.
	require.Eventually(t, func() bool {
		dropped, err := p.MetricSum("podpatch_events_dropped_total")
		require.NoError(t, err)
		return dropped >= 3
	}, 45*time.Second-time.Since(began), 500*time.Millisecond, "the refused executor settled as not stored")
	time.Sleep(2 * time.Second) // four windows: anything still to write is written
	evs := podpatchEvents(t, ns, "Pod", driver.Name)
	require.Equal(t, 1, appliedCount(evs, "worker"), "only the executor stored: %v", eventLines(evs))
	require.Empty(t, eventLines(podpatchEvents(t, ns, "Pod", taken.Name)), "no Event on someone else's Pod")
	require.Empty(t, eventLines(podpatchEvents(t, ns, "Pod", takenExec.Name)))
	stored := &corev1.Pod{}
	require.NoError(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: taken.Name}, stored))
	require.Equal(t, taken.UID, stored.UID)
	require.NotContains(t, stored.Annotations, policies.AppliedAnnotation, "the other Pod never went through podpatch")
}

// eventLines lists Events as "Reason: message" lines.
func eventLines(evs []corev1.Event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s: %s", e.Reason, strings.TrimSpace(e.Message)))
	}
	return out
}
