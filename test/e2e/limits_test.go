package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podpatch/podpatch/policies"
)

// warnings collects the admission warnings the API server relays to a client.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// warningClient is a clientset whose responses' warnings are collected.
func warningClient(t *testing.T) (*kubernetes.Clientset, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandler = w
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs, w
}

// TestRequestBudget runs podpatch with a budget that is always spent: the API server still
// creates Pods no enforce policy binds (unpatched) and policy ConfigMaps (unvalidated), and
// relays podpatch's warning; a Pod the platform's enforce policies bind is refused, to be
// retried (reference §5, "Enforce: applied or denied"); an invalid policy let in is still
// caught when it is compiled.
func TestRequestBudget(t *testing.T) {
	p := servePodpatch(t, "--request-budget=1ns")
	cs, w := warningClient(t)

	// No enforce policy yet: admitted unchanged, with the warning.
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		var err error
		pod, err = cs.CoreV1().Pods("default").Create(contextBackground(), daskWorker("default", "over-budget"),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err, "a Pod no enforce policy binds is never refused for podpatch's budget")
		return strings.Contains(strings.Join(w.take(), "\n"), "podpatch did not apply policies because its request budget ran out")
	}, 30*time.Second, 200*time.Millisecond, "the API server never relayed podpatch's warning")
	require.Empty(t, pod.Annotations[policies.AppliedAnnotation], "admitted unchanged")
	require.Positive(t, p.metricSum(t, "podpatch_budget_exceeded_total"))

	// The examples' enforce policies (cost-center, security-baseline) bind every Dask worker:
	// once podpatch serves them, the same Pod is refused, to be retried, naming the budget.
	applyManifests(t, kustomizeBuild(t, "manifests/examples"))
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Pods("default").Create(contextBackground(), daskWorker("default", "over-budget"),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "request budget ran out; retry (budget)") &&
			strings.Contains(err.Error(), "podpatch-system/security-baseline/security-baseline")
	}, 30*time.Second, 200*time.Millisecond, "a Pod the enforce policies bind is refused for the budget")

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "unvalidated",
			Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{"p.yaml": policyYAML("broken", "tolerations: [{key: spot, operator: Exits}]")},
	}
	_, err := cs.CoreV1().ConfigMaps("team-a").Create(contextBackground(), cm, metav1.CreateOptions{})
	require.NoError(t, err, "a policy that could not be validated in time is let in")
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps("team-a").Delete(contextBackground(), cm.Name, metav1.DeleteOptions{})
	})
	require.Contains(t, strings.Join(w.take(), "\n"), "podpatch could not validate this policy ConfigMap in time")
	require.Eventually(t, func() bool {
		events, err := cs.CoreV1().Events("team-a").List(contextBackground(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range events.Items {
			if e.InvolvedObject.Name == cm.Name && e.Reason == "InvalidPolicy" && strings.Contains(e.Message, "tolerations[0].operator") {
				return true
			}
		}
		return false
	}, 20*time.Second, 200*time.Millisecond, "the policy is still checked when it is compiled")
}

// TestHostilePolicy: a policy ConfigMap with tens of thousands of problems is denied with a
// bounded message that lists the first ones and counts the rest.
func TestHostilePolicy(t *testing.T) {
	p := servePodpatch(t)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "hostile",
			Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data: map[string]string{},
	}
	for i := range 20000 {
		cm.Data[fmt.Sprintf("k%05d", i)] = "x" // data keys must end in .yaml
	}
	var msg string
	require.Eventually(t, func() bool {
		err := k8s.Create(contextBackground(), cm.DeepCopy())
		if err == nil {
			require.NoError(t, k8s.Delete(contextBackground(), cm.DeepCopy()))
			return false // the validating webhook is not in force yet
		}
		msg = err.Error()
		return true
	}, 30*time.Second, 200*time.Millisecond)
	require.Contains(t, msg, "denied the request")
	require.Contains(t, msg, "team-a/hostile: k00000: ")
	require.Regexp(t, `and \d+ more problems`, msg)
	require.Less(t, len(msg), 32<<10, "the denial is bounded")
	require.Zero(t, p.metricSum(t, "podpatch_budget_exceeded_total"))
}

// fallbackWarning begins the warning of podpatch's answer to a request it did not handle
// (reference §5, "Requests podpatch does not handle"): the object was admitted unchanged.
const fallbackWarning = "podpatch did not apply policies"

// requestWarnings collects the warnings of one request's response: a client made by
// requestWarningClient puts them there when the request's context carries it, so that
// concurrent requests each know their own.
type requestWarnings struct {
	mu   sync.Mutex
	seen []string
}

type requestWarningsKey struct{}

func (w *requestWarnings) context(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestWarningsKey{}, w)
}

// said reports whether a warning begins with prefix.
func (w *requestWarnings) said(prefix string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.seen, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

type contextWarnings struct{}

func (contextWarnings) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, text string) {
	if w, ok := ctx.Value(requestWarningsKey{}).(*requestWarnings); ok {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.seen = append(w.seen, text)
	}
}

// requestWarningClient is a clientset that gives each request's warnings to the
// requestWarnings its context carries.
func requestWarningClient(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandlerWithContext = contextWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}
