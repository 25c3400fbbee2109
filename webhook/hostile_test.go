package webhook

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
)

// hostilePolicies are policy texts a tenant could write to take podpatch down.
func hostilePolicies() map[string]string {
	return map[string]string{
		"flow mapping aliases":  hostiletest.PolicyDocument("team", hostiletest.FlowMappingAliasBomb(5, 10, 4000, 2300, false)),
		"block aliases":         "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n",
		"merge keys":            "b: {<<: {x: 1}}\n",
		"custom tag":            "a: !boom x\n",
		"deep nesting":          strings.Repeat("[", 9000) + strings.Repeat("]", 9000),
		"densest megabyte":      "[" + strings.Repeat("0,", policies.MaxConfigMapBytes/2-64) + "0]",
		"many dense documents":  strings.Repeat("---\n["+strings.Repeat("0,", 60000)+"0]\n", 8),
		"a comment per element": "[" + strings.Repeat("0, #\n", policies.MaxConfigMapBytes/5-64) + "0]",
	}
}

// TestStoreSurvivesHostilePolicies: every hostile version of a ConfigMap is refused, with
// the reason named, within bounded memory, and the last good version keeps patching.
func TestStoreSurvivesHostilePolicies(t *testing.T) {
	m := newTestMetrics(t)
	var reported []string
	s := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), func(_ *corev1.ConfigMap, p policies.Problems) { reported = append(reported, p.Error()) })
	good := policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "a", 1))
	good.ResourceVersion = "1"
	require.Empty(t, s.Upsert(good))
	s.MarkSynced()
	h := &Review{Handler: &Mutator{Source: s, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
	admit := func() string {
		t.Helper()
		_, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
		return string(applyResponse(t, []byte(workerPod), resp))
	}
	require.Contains(t, admit(), `"team":"a"`)

	rv := 1
	for name, text := range hostilePolicies() {
		rv++
		cm := policyCM("team-a", "labels", text)
		cm.ResourceVersion = fmt.Sprint(rv)
		var probs policies.Problems
		n := hostiletest.Allocated(func() { probs = s.Upsert(cm) })
		require.NotEmpty(t, probs, name)
		// The densest text costs a few hundred bytes per byte, a document at a time.
		require.Less(t, n, uint64(400<<20), "%s: compiling allocated %d bytes", name, n)
		s.Publish()
		require.Contains(t, admit(), `"team":"a"`, "%s: the last good version keeps patching", name)
		require.Equal(t, []string{"labels"}, s.Snapshot().Invalid["team-a"], name)
	}
	require.Len(t, reported, len(hostilePolicies()))
	joined := strings.Join(reported, "\n")
	for _, want := range []string{"anchors and aliases are not accepted", "merge keys are not accepted",
		"tags beyond the core schema are not accepted", "nested deeper than 64 levels", "more than 131072 bytes of YAML text"} {
		require.Contains(t, joined, want)
	}
}

// TestValidatorRefusesHostilePolicies: /validate denies each hostile policy, naming why,
// within bounded memory; one it cannot finish within the request budget gets the fallback.
func TestValidatorRefusesHostilePolicies(t *testing.T) {
	m := newTestMetrics(t)
	h := &Review{Name: "validate", Handler: &Validator{Options: policies.DefaultOptions(), Metrics: m}, Budget: time.Minute, Metrics: m}
	for name, text := range hostilePolicies() {
		cm := policyCM("team-a", "hostile", text)
		cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
		raw, err := json.Marshal(cm)
		require.NoError(t, err)
		body := review(t, "ConfigMap", "team-a", admissionv1.Create, raw, false)
		var resp *admissionv1.AdmissionResponse
		n := hostiletest.Allocated(func() { _, resp = post(t, h, body, "application/json") })
		require.NotNil(t, resp, name)
		require.False(t, resp.Allowed, name)
		require.Less(t, n, uint64(400<<20), "%s: validating allocated %d bytes", name, n)
	}
	// Past the budget the compile stops and the fallback answers.
	cm := policyCM("team-a", "slow", hostilePolicies()["densest megabyte"])
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	raw, err := json.Marshal(cm)
	require.NoError(t, err)
	h.Budget = time.Millisecond
	rec, resp := post(t, h, review(t, "ConfigMap", "team-a", admissionv1.Create, raw, false), "application/json")
	requireFallback(t, rec, resp, "uid-ConfigMap", "could not validate this policy ConfigMap in time")
}

// TestCompileSlots: while every compile slot is busy, /validate waits within its budget and
// then answers with the fallback; the store waits for a slot.
func TestCompileSlots(t *testing.T) {
	m := newTestMetrics(t)
	for range policystore.MaxCompiles {
		require.NoError(t, policystore.AcquireCompile(t.Context()))
	}
	released := false
	release := func() {
		if !released {
			released = true
			for range policystore.MaxCompiles {
				policystore.ReleaseCompile()
			}
		}
	}
	t.Cleanup(release)

	cm := policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "a", 1))
	cm.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	raw, err := json.Marshal(cm)
	require.NoError(t, err)
	h := &Review{Name: "validate", Handler: &Validator{Options: policies.DefaultOptions(), Metrics: m}, Budget: 50 * time.Millisecond, Metrics: m}
	rec, resp := post(t, h, review(t, "ConfigMap", "team-a", admissionv1.Create, raw, false), "application/json")
	requireFallback(t, rec, resp, "uid-ConfigMap", "could not validate this policy ConfigMap in time")

	s := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), nil)
	done := make(chan policies.Problems)
	go func() { done <- s.Upsert(cm) }()
	select {
	case <-done:
		t.Fatal("the store compiled without a slot")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	require.Empty(t, <-done)
}
