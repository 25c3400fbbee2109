package secondline

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/vap"
)

func set(t *testing.T, docs string) *policies.Set {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "p",
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": docs}}
	s, probs := policies.Compile([]policies.SourcedConfigMap{{File: "p.yaml", ConfigMap: cm}}, policies.DefaultOptions())
	require.Empty(t, probs)
	return s
}

const two = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: label}
spec:
  mode: enforce
  template: {metadata: {labels: {cost-center: x}}}
---
apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: runtime}
spec:
  mode: enforce
  template: {spec: {runtimeClassName: gvisor}}
`

// TestOnce applies the generated objects, deletes the owned ones a later set no longer gives,
// and leaves alone what it does not own.
func TestOnce(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	api := c.AdmissionregistrationV1()
	foreign := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}
	_, err := api.ValidatingAdmissionPolicies().Create(ctx, foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	s, err := New(Options{Client: c, Policies: func() *policies.Set { return nil }, Ready: func() bool { return true },
		PlatformNamespace: policies.DefaultPlatformNamespace, Log: logr.Discard()})
	require.NoError(t, err)

	names := func() (ps, bs []string) {
		l, err := api.ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range l.Items {
			ps = append(ps, p.Name)
		}
		lb, err := api.ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, b := range lb.Items {
			bs = append(bs, b.Name)
			require.Equal(t, vap.ManagedBy, b.Labels[vap.ManagedByLabel])
		}
		return ps, bs
	}
	require.NoError(t, s.Once(ctx, set(t, two)))
	ps, bs := names()
	require.ElementsMatch(t, []string{"someone-elses", "podpatch.p.label.pod", "podpatch.p.runtime.pod"}, ps)
	require.ElementsMatch(t, []string{"podpatch.p.label.pod", "podpatch.p.runtime.pod"}, bs)
	got, err := api.ValidatingAdmissionPolicies().Get(ctx, "podpatch.p.runtime.pod", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, got.Spec.Validations[0].Message, `requires spec.runtimeClassName == "gvisor"`)
	require.Equal(t, FieldManager, got.ManagedFields[0].Manager)

	require.NoError(t, s.Once(ctx, set(t, strings.Split(two, "---\n")[0])))
	ps, bs = names()
	require.ElementsMatch(t, []string{"someone-elses", "podpatch.p.label.pod"}, ps)
	require.ElementsMatch(t, []string{"podpatch.p.label.pod"}, bs)
}
