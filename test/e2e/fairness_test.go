package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
)

// fairnessMemoryLimit is the manifests' container memory limit (manifests/base, 256Mi), passed
// to podpatch as they pass it.
const fairnessMemoryLimit = 256 << 20

// Sizes of the worst tenant input: policy ConfigMaps far beyond a namespace's limit,
// each near the size limit, and Pods of many containers under the namespace's full set of
// policies.
const (
	fairLeftOut      = 380 // policy ConfigMaps beyond the tenant's limit
	fairStreams      = 8   // the tenant's concurrent streams of Pods through the API server
	fairDirect       = 32  // and of their reviews sent to podpatch straight
	fairContainers   = 41  // containers of each tenant Pod
	fairLoad         = 8 * time.Second
	fairPolicyEnv    = 16 // env items each of the tenant's 32 policies sets on every container
	fairPaddingKeys  = 8  // data keys of a left-out ConfigMap
	fairPaddingBytes = 120 << 10
)

// fairPolicy is a namespace policy that sets n env items on every container of Dask workers.
func fairPolicy(name string, n int, padding int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", strings.Repeat("x", padding))
	fmt.Fprintf(&b, "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: %s}\n", name)
	b.WriteString("spec:\n  match: {managers: [dask], roles: [worker]}\n  template:\n    spec:\n      containers:\n        - name: \"*\"\n          env:\n")
	for i := range n {
		fmt.Fprintf(&b, "            - {name: %s_%d, value: \"%s\"}\n", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), i, strings.Repeat("v", 16))
	}
	return b.String()
}

// tenantPod is a Dask worker of fairContainers containers, each with a few env items: a body
// of some 80 KB, over the ordinary size.
func tenantPod(ns, name string) *corev1.Pod {
	pod := daskWorker(ns, name)
	base := pod.Spec.Containers[0]
	pod.Spec.Containers = nil
	for i := range fairContainers {
		c := *base.DeepCopy()
		if i > 0 {
			c.Name = fmt.Sprintf("side-%d", i)
		}
		for j := range 8 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("OWN_%d", j), Value: strings.Repeat("o", 200)})
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	return pod
}

// TestFairness runs `podpatch serve` under the manifests' memory limit against the worst a
// tenant can do: 380 policy ConfigMaps near the size limit beyond its namespace's limit of
// policies, and, with its 32 policies in force, concurrent streams of Pods of 41 containers
// (through the API server, and their reviews sent to podpatch straight, as the API server
// would for a tenant creating them faster than this test's cores can) — while another
// namespace creates small Pods. The other namespace's Pods are all patched, none
// answered with a fallback, and podpatch's peak memory (VmHWM) stays under the limit
// (reference §3 "Limits", §5).
func TestFairness(t *testing.T) {
	ctx := contextBackground()
	tenant, other := "fair-tenant", "fair-other"
	for _, ns := range []string{tenant, other} {
		require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	t.Cleanup(func() {
		for _, ns := range []string{tenant, other} {
			_ = k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
			_ = k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), client.MatchingLabels{policies.PolicyLabel: "true"})
		}
	})
	policyCM := func(ns, name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: data}
	}
	// The policies, before podpatch starts (its initial list is the worst moment): the
	// tenant's 32, its 380 left out, and the other namespace's one.
	var cms []*corev1.ConfigMap
	for i := range policies.MaxNamespacePolicies {
		name := fmt.Sprintf("a-%02d", i)
		cms = append(cms, policyCM(tenant, name, map[string]string{"p.yaml": fairPolicy("p-"+name, fairPolicyEnv, 0)}))
	}
	for i := range fairLeftOut {
		name := fmt.Sprintf("z-%03d", i)
		data := map[string]string{}
		for k := range fairPaddingKeys {
			data[fmt.Sprintf("p%d.yaml", k)] = fairPolicy(fmt.Sprintf("z%03d-%d", i, k), fairPolicyEnv, fairPaddingBytes)
		}
		cms = append(cms, policyCM(tenant, name, data))
	}
	cms = append(cms, policyCM(other, "labels", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\n" +
		"metadata: {name: other}\nspec:\n  match: {managers: [dask]}\n  template:\n    metadata:\n      labels: {team: other}\n"}))
	// The platform's enforce policy on the tenant's Pods (reference §5: applied or denied,
	// whatever the load): nothing of the tenant's is admitted without it.
	enforce := policyCM(policies.DefaultPlatformNamespace, "fair-enforce", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\n" +
		"metadata: {name: cost}\nspec:\n  mode: enforce\n  match: {managers: [dask], namespaces: [" + tenant + "]}\n  template:\n    metadata:\n      labels: {cost-center: platform}\n"})
	cms = append(cms, enforce)
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), enforce) })
	began := time.Now()
	work := make(chan *corev1.ConfigMap)
	var wg sync.WaitGroup
	errs := make(chan error, len(cms))
	for range 8 {
		wg.Go(func() {
			for cm := range work {
				errs <- k8s.Create(ctx, cm)
			}
		})
	}
	for _, cm := range cms {
		work <- cm
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d policy ConfigMaps written in %s", len(cms), time.Since(began).Round(time.Millisecond))

	certDir, ca := servingCerts(t)
	began = time.Now()
	p := startPodpatch(t, certDir, "--memory-limit=256Mi")
	ready := time.Since(began)
	pid := p.PID()
	startPeak := vmHWM(t, pid)
	// The second line (reference §5): the API server's own check of the enforce policy, so that
	// a Pod whose review podpatch could not answer within the webhook's timeoutSeconds — which
	// the API server then stores unpatched (failurePolicy Ignore) — is refused instead. Without
	// it, "no tenant Pod stored without the enforce policy" would hold only on a machine quiet
	// enough for every answer to come in time. Installed, and seen to refuse a worker without
	// the policy's label, before the mutating webhook.
	enforceDir := t.TempDir()
	enforceYAML, err := yaml.Marshal(struct {
		metav1.TypeMeta   `json:",inline"`
		*corev1.ConfigMap `json:",inline"`
	}{metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, enforce})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(enforceDir, "fair-enforce.yaml"), enforceYAML, 0o600))
	installSecondLine(t, secondLineFromCommand(t, enforceDir), tenant)
	require.Eventually(t, func() bool {
		err := k8s.Create(ctx, daskWorker(tenant, "second-line-probe"), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
	}, 30*time.Second, 100*time.Millisecond, "the second line never refused a tenant worker without the enforced label")
	mwc, _ := webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	installWebhooks(t, mwc)
	require.Eventually(t, func() bool {
		return p.metricSum(t, "podpatch_policy_configmaps_invalid") == fairLeftOut
	}, 30*time.Second, 100*time.Millisecond, "the ConfigMaps beyond the limit are reported left out")
	t.Logf("podpatch ready in %s with %d ConfigMaps left out; peak RSS %d MiB", ready.Round(time.Millisecond), fairLeftOut, startPeak>>20)

	// The other namespace's policy applies: wait until the API server calls podpatch for it.
	otherCS, otherWarnings := warningClient(t)
	require.Eventually(t, func() bool {
		pod, err := otherCS.CoreV1().Pods(other).Create(ctx, daskWorker(other, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		return pod.Annotations[policies.AppliedAnnotation] != ""
	}, 30*time.Second, 100*time.Millisecond, "the webhook never served the other namespace")
	otherWarnings.take()

	// The load: the tenant's streams of large Pods, and the other namespace's small ones.
	load, cancel := context.WithTimeout(ctx, fairLoad)
	defer cancel()
	tenantCS, tenantWarnings := warningClient(t)
	var tenantSent, tenantPatched, tenantNanos, tenantUnenforced, tenantRefused atomic.Int64
	var streams sync.WaitGroup
	for s := range fairStreams {
		streams.Go(func() {
			for i := 0; load.Err() == nil; i++ {
				sent := time.Now()
				pod, err := tenantCS.CoreV1().Pods(tenant).Create(ctx, tenantPod(tenant, fmt.Sprintf("t-%d-%d", s, i)), metav1.CreateOptions{})
				tenantNanos.Add(int64(time.Since(sent)))
				tenantSent.Add(1)
				if err == nil && pod.Annotations[policies.AppliedAnnotation] != "" {
					tenantPatched.Add(1)
				}
				if err == nil && pod.Labels["cost-center"] != "platform" {
					tenantUnenforced.Add(1) // stored without the enforce policy
				}
				if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
					tenantRefused.Add(1) // podpatch's answer came too late: the second line held
				}
			}
		})
	}
	// The API server on this test's few cores creates a few such Pods a second; the reviews it
	// would send for more, straight to podpatch, make podpatch the bottleneck.
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	raw, err := json.Marshal(tenantPod(tenant, "direct"))
	require.NoError(t, err)
	var directSent, directPatched, directFallbacks, directDenied, directUnenforced atomic.Int64
	for s := range fairDirect {
		streams.Go(func() {
			for i := 0; load.Err() == nil; i++ {
				body, err := json.Marshal(admissionv1.AdmissionReview{
					TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
					Request: &admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprintf("direct-%d-%d", s, i)),
						Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
						Namespace: tenant, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
				if err != nil {
					panic(err)
				}
				resp, err := direct.Post(p.url()+"/mutate", "application/json", bytes.NewReader(body))
				if err != nil {
					continue
				}
				var out admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				directSent.Add(1)
				switch {
				case err != nil || out.Response == nil:
				case !out.Response.Allowed:
					directDenied.Add(1)
				case !bytes.Contains(out.Response.Patch, []byte(`"cost-center":"platform"`)) && !bytes.Contains(out.Response.Patch, []byte(`/cost-center","value":"platform"`)):
					directUnenforced.Add(1) // admitted without the enforce policy
				case len(out.Response.Patch) > 0:
					directPatched.Add(1)
				case strings.Contains(strings.Join(out.Response.Warnings, "\n"), "podpatch did not"):
					directFallbacks.Add(1)
				}
			}
		})
	}
	type result struct {
		name, applied string
		warnings      []string
		err           error
	}
	var results []result
	for i := 0; load.Err() == nil; i++ {
		pod, err := otherCS.CoreV1().Pods(other).Create(ctx, daskWorker(other, fmt.Sprintf("o-%d", i)), metav1.CreateOptions{})
		r := result{name: fmt.Sprintf("o-%d", i), err: err, warnings: otherWarnings.take()}
		if err == nil {
			r.applied = pod.Annotations[policies.AppliedAnnotation]
		}
		results = append(results, r)
		select {
		case <-load.Done():
		case <-time.After(300 * time.Millisecond): // a steady trickle, as a team's ordinary work
		}
	}
	streams.Wait()
	peak := vmHWM(t, pid)
	fallbacks := 0
	for _, w := range tenantWarnings.take() {
		if strings.Contains(w, "podpatch did not") {
			fallbacks++
		}
	}
	t.Logf("tenant: %d reviews sent to podpatch straight, %d patched, %d denied, %d fallbacks", directSent.Load(), directPatched.Load(), directDenied.Load(), directFallbacks.Load())
	t.Logf("tenant: %d Pods refused by the second line (podpatch's answer later than the webhook's timeout)", tenantRefused.Load())
	t.Logf("tenant: %d Pods of %d containers sent (%s each), %d patched, %d fallback warnings; other: %d Pods; podpatch peak RSS %d MiB (limit %d MiB); admission warnings %v (the namespace-limit one included), budget exceeded %v",
		tenantSent.Load(), fairContainers, (time.Duration(tenantNanos.Load()) / time.Duration(max(tenantSent.Load(), 1))).Round(time.Millisecond), tenantPatched.Load(), fallbacks, len(results), peak>>20, fairnessMemoryLimit>>20,
		p.metricSum(t, "podpatch_admission_warnings_total"), p.metricSum(t, "podpatch_budget_exceeded_total"))

	for _, r := range results {
		require.NoError(t, r.err, r.name)
		require.Contains(t, r.applied, other+"/labels/other", "%s patched", r.name)
		for _, w := range r.warnings {
			require.NotContains(t, w, "podpatch did not", "%s: no fallback", r.name)
		}
	}
	require.GreaterOrEqual(t, len(results), 8, "the other namespace's Pods are created at their pace")
	require.Positive(t, tenantPatched.Load()+directPatched.Load(), "the tenant is served too")
	require.Zero(t, tenantUnenforced.Load(), "no tenant Pod stored without the platform's enforce policy")
	require.Zero(t, directUnenforced.Load(), "no tenant review admitted without the platform's enforce policy")
	require.Less(t, peak, int64(fairnessMemoryLimit), "podpatch's peak memory under the manifests' limit")
}
