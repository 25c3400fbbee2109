package secondline

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/vap"
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
  match: {managers: [ray], roles: [worker]}
  template: {metadata: {labels: {cost-center: x}}}
---
apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: runtime}
spec:
  mode: enforce
  match: {managers: [spark], roles: [worker]}
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
	require.ElementsMatch(t, []string{"someone-elses", "podpatch.pod.ray.worker", "podpatch.pod.spark.worker"}, ps)
	require.ElementsMatch(t, []string{"podpatch.pod.ray.worker", "podpatch.pod.spark.worker"}, bs)
	got, err := api.ValidatingAdmissionPolicies().Get(ctx, "podpatch.pod.spark.worker", metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, got.Spec.Validations[0].Message, `requires spec.runtimeClassName == "gvisor"`)
	require.Equal(t, FieldManager, got.ManagedFields[0].Manager)

	require.NoError(t, s.Once(ctx, set(t, strings.Split(two, "---\n")[0])))
	ps, bs = names()
	require.ElementsMatch(t, []string{"someone-elses", "podpatch.pod.ray.worker"}, ps)
	require.ElementsMatch(t, []string{"podpatch.pod.ray.worker"}, bs)
}

// TestStart: nothing before the store is ready; the snapshot's objects once it is; a new
// snapshot with the same enforce policies (a namespace policy changed) applies nothing; a
// changed one applies and deletes.
func TestStart(t *testing.T) {
	c := fake.NewClientset()
	a, same, b := set(t, two), set(t, two), set(t, strings.Split(two, "---\n")[0])
	var mu sync.Mutex
	current, ready, reads := a, false, 0
	s, err := New(Options{Client: c, PlatformNamespace: policies.DefaultPlatformNamespace, Log: logr.Discard(), Interval: time.Millisecond,
		Policies: func() *policies.Set { mu.Lock(); defer mu.Unlock(); reads++; return current },
		Ready:    func() bool { mu.Lock(); defer mu.Unlock(); return ready }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	patches := func() int {
		n := 0
		for _, a := range c.Actions() {
			if a.GetVerb() == "patch" && a.GetResource().Resource == "validatingadmissionpolicies" {
				n++
			}
		}
		return n
	}
	waitReads := func() {
		mu.Lock()
		r := reads
		mu.Unlock()
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return reads > r+2 }, 10*time.Second, time.Millisecond)
	}
	waitReads()
	require.Zero(t, patches(), "nothing is applied before the store is ready")
	mu.Lock()
	ready = true
	mu.Unlock()
	require.Eventually(t, func() bool { return patches() == 2 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	current = same
	mu.Unlock()
	waitReads()
	require.Equal(t, 2, patches(), "the same enforce policies in a new snapshot apply nothing")
	mu.Lock()
	current = b
	mu.Unlock()
	require.Eventually(t, func() bool {
		l, err := c.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 1
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, 3, patches())
	cancel()
	require.NoError(t, <-done)
}
