package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies"
)

const enforceNamespace = "e2e-enforce"

// enforceBaseline is the platform's enforce policy of TestEnforceE2E, for the Dask workers and
// schedulers of enforceNamespace: a ServiceAccount, a RuntimeClass, a memory limit, no
// privilege escalation and a cost label.
const enforceBaseline = "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: baseline}\nspec:\n  mode: enforce\n" +
	"  match: {managers: [dask], namespaces: [" + enforceNamespace + "]}\n" +
	"  template:\n    metadata: {labels: {cost-center: data-platform}}\n" +
	"    spec:\n      serviceAccountName: platform-sa\n      runtimeClassName: e2e-sandbox\n" +
	"      containers: [{name: '*', resources: {limits: {memory: 4Gi}}, securityContext: {allowPrivilegeEscalation: false}}]\n"

// TestEnforceE2E is reference §5's rule through the real API server: Dask Pods generated with
// the shapes that used to escape the platform's enforce policy (requests above the enforced
// limit, privileged containers, annotations at the limit, the enforced ServiceAccount deleted
// by the tenant) are either refused, the message naming the policy, or stored with every field
// the policy sets — never stored without it.
func TestEnforceE2E(t *testing.T) {
	ctx := contextBackground()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: enforceNamespace}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, ns)))
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "platform-sa", Namespace: enforceNamespace}}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, sa)))
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-sandbox"}, Handler: "runsc"}
	require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, rc)))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), rc) })

	servePodpatch(t)
	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-enforce", map[string]string{"p.yaml": enforceBaseline})
	const ref = "podpatch-system/e2e-enforce/baseline"

	pod := func(name string, edit func(obj map[string]any)) *unstructured.Unstructured {
		u := readObject(t, "policies/testdata/fixtures/dask-operator/worker-pod.yaml")
		meta := u.Object["metadata"].(map[string]any)
		delete(meta, "generateName")
		delete(meta, "ownerReferences")
		meta["name"], meta["namespace"] = name, enforceNamespace
		spec := u.Object["spec"].(map[string]any)
		delete(spec, "serviceAccountName")
		delete(spec, "serviceAccount")
		edit(u.Object)
		return u
	}
	// holds reports whether a stored Pod has every field the baseline sets.
	holds := func(u *unstructured.Unstructured) error {
		var got corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
			return err
		}
		if got.Labels["cost-center"] != "data-platform" || got.Spec.ServiceAccountName != "platform-sa" ||
			got.Spec.RuntimeClassName == nil || *got.Spec.RuntimeClassName != "e2e-sandbox" {
			return fmt.Errorf("pod-level fields missing: %v %s %v", got.Labels, got.Spec.ServiceAccountName, got.Spec.RuntimeClassName)
		}
		for _, c := range got.Spec.Containers {
			if c.Resources.Limits.Memory().String() != "4Gi" || c.SecurityContext == nil || c.SecurityContext.AllowPrivilegeEscalation == nil ||
				*c.SecurityContext.AllowPrivilegeEscalation {
				return fmt.Errorf("container %s lacks the enforced fields: %v %v", c.Name, c.Resources.Limits, c.SecurityContext)
			}
		}
		return nil
	}
	// Wait until podpatch serves the baseline.
	require.Eventually(t, func() bool {
		u := pod("e2e-enforce-probe", func(map[string]any) {})
		if err := k8s.Create(ctx, u, client.DryRunAll); err != nil {
			return false
		}
		return holds(u) == nil
	}, 30*time.Second, 200*time.Millisecond, "podpatch serves the enforce policy")

	shapes := []struct {
		name string
		edit func(obj map[string]any, r *rand.Rand)
	}{
		{"requests above the enforced limit", func(obj map[string]any, r *rand.Rand) {
			for _, c := range obj["spec"].(map[string]any)["containers"].([]any) {
				c.(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"memory": fmt.Sprintf("%dGi", 5+r.IntN(60))}}
			}
		}},
		{"privileged", func(obj map[string]any, _ *rand.Rand) {
			for _, c := range obj["spec"].(map[string]any)["containers"].([]any) {
				c.(map[string]any)["securityContext"] = map[string]any{"privileged": true}
			}
		}},
		{"annotations at the limit", func(obj map[string]any, r *rand.Rand) {
			ann := map[string]any{}
			for i := range 4 {
				ann[fmt.Sprintf("pad.example.com/a%d", i)] = strings.Repeat("x", 64*1024-40-r.IntN(100))
			}
			obj["metadata"].(map[string]any)["annotations"] = ann
		}},
		{"requests within the limit", func(obj map[string]any, r *rand.Rand) {
			for _, c := range obj["spec"].(map[string]any)["containers"].([]any) {
				c.(map[string]any)["resources"] = map[string]any{"requests": map[string]any{"memory": fmt.Sprintf("%dMi", 100+r.IntN(3000))}}
			}
		}},
		{"a node selector of the user's", func(obj map[string]any, _ *rand.Rand) {
			obj["spec"].(map[string]any)["nodeSelector"] = map[string]any{"pool": "mine"}
		}},
	}
	r := rand.New(rand.NewPCG(33, 2))
	var refused, stored int
	create := func(name string, edits []string, u *unstructured.Unstructured) {
		err := k8s.Create(ctx, u)
		if err != nil {
			require.True(t, apierrors.IsForbidden(err), "%s (%v): refused by podpatch, not by another check: %v", name, edits, err)
			require.Contains(t, err.Error(), ref, "%s: the denial names the policy", name)
			refused++
			return
		}
		stored++
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(u.GroupVersionKind())
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(u), got))
		require.NoError(t, holds(got), "%s (%v): stored, so with every enforced field", name, edits)
	}
	for i := range 24 {
		var edits []string
		name := fmt.Sprintf("e2e-enforce-%d", i)
		u := pod(name, func(obj map[string]any) {
			for _, s := range shapes {
				if r.IntN(3) == 0 {
					s.edit(obj, r)
					edits = append(edits, s.name)
				}
			}
		})
		create(name, edits, u)
	}
	// The tenant deletes the ServiceAccount the platform enforces: refused, not stored without it.
	require.NoError(t, k8s.Delete(ctx, sa))
	require.Eventually(t, func() bool {
		err := k8s.Create(ctx, pod("e2e-enforce-no-sa", func(map[string]any) {}), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), ref) && strings.Contains(err.Error(), "service-account-not-found")
	}, 30*time.Second, 200*time.Millisecond, "a missing enforced ServiceAccount denies the Pod")
	refused++
	t.Logf("%d refused, %d stored with the policy", refused, stored)
	require.Positive(t, stored)
	require.Greater(t, refused, 1)
}
