package policystore_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/test/cluster"
)

// floodMemoryLimit is the manifests' container memory limit (manifests/base, 256Mi), passed to
// podpatch as they pass it.
const floodMemoryLimit = 256 << 20

// floodWait is how long a platform change may take to be served before the measure says it
// was not served during the flood.
const floodWait = 60 * time.Second

// floodCase is one tenant flood: how many policy ConfigMaps the tenants rewrite, their size
// (padding: a comment, so every version compiles to the same policies), how many writers
// rewrite them at once, and the tenant's Pods meanwhile.
type floodCase struct {
	name       string
	tenants    int // namespaces, each with configMaps
	configMaps int
	writers    int
	padding    int // bytes per data key
	keys       int // data keys per ConfigMap
	env        int // env items each policy sets on every container
	pods       int // streams of the tenant's Pods of floodContainers containers, meanwhile
	direct     int // and streams of their reviews sent to podpatch straight
}

// floodContainers is the containers of each of the tenant's Pods (as test/e2e's TestFairness).
const floodContainers = 41

// TestTenantFloodMeasure runs `podpatch serve` under the manifests' memory limit behind a real
// kube-apiserver and etcd (bin/), with the webhook configurations of manifests/base, and floods
// tenant namespaces with updates of their policy ConfigMaps as fast as the API server takes
// them (and, in the worst cases, with the tenant's Pods). Meanwhile it creates and deletes a
// platform enforce policy, again and again, and measures how long podpatch takes to serve each
// change (podpatch_policies{scope="platform"}, polled), whether the tenant's Pods hold another
// platform enforce policy, and podpatch's peak memory (VmHWM) per case. It asserts nothing: it
// is the measurement behind docs/operations.md ("Memory") and reference §5 ("Policy source"),
// run by hand:
//
//	PODPATCH_FLOOD_MEASURE=1 go test ./webhook/policystore -run TestTenantFloodMeasure -v -timeout 30m
//
// PODPATCH_FLOOD_BIN names a podpatch binary to measure (else one is built from this module);
// PODPATCH_FLOOD_SECONDS the length of each flood (default 30); PODPATCH_FLOOD_CASES a comma
// list of the cases to run (default all); PODPATCH_FLOOD_LOGS a directory for podpatch's logs;
// PODPATCH_FLOOD_PROFILES a directory for its heap profile as each flood ends.
func TestTenantFloodMeasure(t *testing.T) {
	if os.Getenv("PODPATCH_FLOOD_MEASURE") == "" {
		t.Skip("PODPATCH_FLOOD_MEASURE is not set")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	cp, err := cluster.Start(filepath.Join(root, "bin"), dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cp.Stop()) })
	bin := os.Getenv("PODPATCH_FLOOD_BIN")
	if bin == "" {
		bin = filepath.Join(dir, "podpatch")
		require.NoError(t, cluster.BuildPodpatch(root, bin))
	}
	seconds := 30
	if s := os.Getenv("PODPATCH_FLOOD_SECONDS"); s != "" {
		seconds, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	rc := rest.CopyConfig(cp.Config)
	rc.QPS, rc.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	ctx := t.Context()
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policies.DefaultPlatformNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	certDir := filepath.Join(dir, "certs")
	require.NoError(t, os.MkdirAll(certDir, 0o700))
	ca, err := cluster.ServingCerts(certDir)
	require.NoError(t, err)

	cases := []floodCase{
		// Small ConfigMaps: the most writes a second, the most versions to read.
		{name: "small", tenants: 1, configMaps: 32, writers: 16, padding: 0, keys: 1},
		// A policy's largest text (128 KiB): many writes a second, each a large compile.
		{name: "medium", tenants: 1, configMaps: 32, writers: 16, padding: 120 << 10, keys: 1},
		// ConfigMaps near Kubernetes' 1 MiB: the most bytes to read and compile per version.
		{name: "large", tenants: 1, configMaps: 32, writers: 8, padding: 120 << 10, keys: 8},
		// Many tenants at once, each changing all of its ConfigMaps.
		{name: "tenants", tenants: 12, configMaps: 4, writers: 24, padding: 120 << 10, keys: 1},
		// The worst together: the tenant's 32 policies set 16 env items on every container,
		// its ConfigMaps are rewritten, and it creates Pods of 41 containers meanwhile, through
		// the API server and as reviews sent to podpatch straight (test/e2e's TestFairness).
		{name: "worst", tenants: 1, configMaps: 32, writers: 16, padding: 120 << 10, keys: 1, env: 16, pods: 4, direct: 32},
		// And with ConfigMaps near 1 MiB.
		{name: "worst-large", tenants: 1, configMaps: 32, writers: 8, padding: 120 << 10, keys: 8, env: 16, pods: 4, direct: 32},
	}
	if only := os.Getenv("PODPATCH_FLOOD_CASES"); only != "" {
		cases = slices.DeleteFunc(cases, func(c floodCase) bool { return !slices.Contains(strings.Split(only, ","), c.name) })
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			measureFlood(t, cs, cp, bin, certDir, ca, c, time.Duration(seconds)*time.Second)
		})
	}
}

// floodPolicy is a namespace policy, after a comment of padding bytes, that sets env items on
// every container of Dask workers.
func floodPolicy(name string, padding, env int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\napiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: %s}\n"+
		"spec:\n  match: {managers: [dask]}\n  template:\n    metadata:\n      labels: {team: a}\n", strings.Repeat("x", padding), name)
	if env > 0 {
		b.WriteString("    spec:\n      containers:\n        - name: \"*\"\n          env:\n")
		for i := range env {
			fmt.Fprintf(&b, "            - {name: %s_%d, value: %q}\n", strings.ToUpper(strings.ReplaceAll(name, "-", "_")), i, strings.Repeat("v", 16))
		}
	}
	return b.String()
}

// floodPod is a Dask worker of floodContainers containers, each with a few env items: a body
// of some 80 KB.
func floodPod(ns, name string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
		"dask.org/component": "worker", "dask.org/cluster-name": "flood", "dask.org/workergroup-name": "flood-default"}}}
	for i := range floodContainers {
		c := corev1.Container{Name: fmt.Sprintf("side-%d", i), Image: "ghcr.io/dask/dask:latest"}
		if i == 0 {
			c.Name = "worker"
		}
		for j := range 8 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("OWN_%d", j), Value: strings.Repeat("o", 200)})
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	return pod
}

func measureFlood(t *testing.T, cs *kubernetes.Clientset, cp *cluster.ControlPlane, bin, certDir string, ca []byte, c floodCase, d time.Duration) {
	ctx := t.Context()
	var cms []*corev1.ConfigMap
	var base []string // each ConfigMap's first text, to which each version adds a line
	for n := range c.tenants {
		ns := fmt.Sprintf("%s-%02d", c.name, n)
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for i := range c.configMaps {
			data := map[string]string{}
			for k := range c.keys {
				data[fmt.Sprintf("p%d.yaml", k)] = floodPolicy(fmt.Sprintf("p%02d-%d", i, k), c.padding, c.env)
			}
			cm, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns,
				Name: fmt.Sprintf("flood-%02d", i), Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: data}, metav1.CreateOptions{})
			require.NoError(t, err)
			cms, base = append(cms, cm), append(base, data["p0.yaml"])
		}
	}
	// The platform's enforce policy on the tenant's Pods, for as long as the case runs: none of
	// them may be admitted without it.
	baseline := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "flood-baseline",
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\n" +
		"kind: PodTemplatePatch\nmetadata: {name: baseline}\nspec:\n  mode: enforce\n  match: {managers: [dask]}\n" +
		"  template:\n    metadata:\n      labels: {baseline: platform}\n"}}
	_, err := cs.CoreV1().ConfigMaps(baseline.Namespace).Create(ctx, baseline, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, cm := range append(cms, baseline) {
			_ = cs.CoreV1().ConfigMaps(cm.Namespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
		}
		if len(cms) > 0 {
			_ = cs.CoreV1().Pods(cms[0].Namespace).DeleteCollection(context.Background(), *metav1.NewDeleteOptions(0), metav1.ListOptions{})
		}
	})
	args := []string{"--memory-limit=256Mi", "--log-level", "info"}
	profiles := os.Getenv("PODPATCH_FLOOD_PROFILES")
	if profiles != "" {
		args = append(args, "--profiling")
	}
	p, err := cluster.StartPodpatch(bin, cp.Kubeconfig, certDir, 0, args...)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Stop())
		if dir := os.Getenv("PODPATCH_FLOOD_LOGS"); dir != "" {
			require.NoError(t, os.WriteFile(filepath.Join(dir, c.name+".log"), p.Output.Bytes(), 0o600))
		}
	})
	objs, err := cluster.Kustomize(filepath.Join("..", "..", "manifests", "base"))
	require.NoError(t, err)
	mwc, vwc, err := cluster.WebhookConfigurations(objs, p.URL(), ca)
	require.NoError(t, err)
	_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mwc.Name, metav1.DeleteOptions{})
	})
	// The API server calls podpatch once it has loaded the configurations.
	probe := floodPod(cms[0].Namespace, "probe")
	probe.Spec.Containers = probe.Spec.Containers[:1]
	require.Eventually(t, func() bool {
		pod, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && pod.Labels["baseline"] == "platform"
	}, 30*time.Second, 100*time.Millisecond, "the API server never called podpatch")
	startPeak := vmHWMOf(t, p.PID())

	// The flood: each writer rewrites its share of the ConfigMaps, one after the other, each
	// version a new text.
	flood, stop := context.WithCancel(ctx)
	var writes, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range c.writers {
		wg.Go(func() {
			for v := 0; flood.Err() == nil; v++ {
				for i := w; i < len(cms) && flood.Err() == nil; i += c.writers {
					cm := cms[i].DeepCopy()
					cm.Data["p0.yaml"] = base[i] + fmt.Sprintf("# v%d\n", v)
					got, err := cs.CoreV1().ConfigMaps(cm.Namespace).Update(flood, cm, metav1.UpdateOptions{})
					if err != nil {
						failed.Add(1)
						continue
					}
					cms[i] = got
					writes.Add(1)
				}
			}
		})
	}
	// The tenant's Pods, meanwhile: each one created must hold the platform's enforce policy.
	var pods, unenforced, podErrs atomic.Int64
	for st := range c.pods {
		wg.Go(func() {
			for i := 0; flood.Err() == nil; i++ {
				pod, err := cs.CoreV1().Pods(cms[0].Namespace).Create(flood, floodPod(cms[0].Namespace, fmt.Sprintf("p-%d-%d", st, i)), metav1.CreateOptions{})
				switch {
				case err != nil:
					podErrs.Add(1)
				case pod.Labels["baseline"] != "platform":
					unenforced.Add(1)
					t.Logf("Pod %s admitted without the enforce policy (applied: %q)", pod.Name, pod.Annotations[policies.AppliedAnnotation])
				default:
					pods.Add(1)
				}
			}
		})
	}
	raw, err := json.Marshal(floodPod(cms[0].Namespace, "direct"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(ca))
	direct := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var reviews, reviewsUnenforced atomic.Int64
	for st := range c.direct {
		wg.Go(func() {
			for i := 0; flood.Err() == nil; i++ {
				body, err := json.Marshal(admissionv1.AdmissionReview{
					TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
					Request: &admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprintf("direct-%d-%d", st, i)),
						Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
						Namespace: cms[0].Namespace, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
				if err != nil {
					t.Error(err)
					return
				}
				resp, err := direct.Post(p.URL()+"/mutate", "application/json", bytes.NewReader(body))
				if err != nil {
					continue
				}
				var out admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				if err != nil || out.Response == nil {
					continue
				}
				reviews.Add(1)
				if out.Response.Allowed && !bytes.Contains(out.Response.Patch, []byte(`platform`)) {
					reviewsUnenforced.Add(1) // admitted without the enforce policy
				}
			}
		})
	}
	time.Sleep(2 * time.Second) // the flood reaches its pace

	// The platform's enforce policy, created and deleted in turn while the flood runs.
	platform := func() float64 {
		v, err := metricWithLabel(p, "podpatch_policies", "scope", "platform")
		require.NoError(t, err)
		return v
	}
	enforce := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: "flood-enforce",
		Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\n" +
		"kind: PodTemplatePatch\nmetadata: {name: cost}\nspec:\n  mode: enforce\n  match: {managers: [dask]}\n" +
		"  template:\n    metadata:\n      labels: {cost-center: platform}\n"}}
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps(enforce.Namespace).Delete(context.Background(), enforce.Name, metav1.DeleteOptions{})
	})
	var lat []time.Duration
	began := time.Now()
	w0 := writes.Load()
	for time.Since(began) < d {
		before := platform()
		var err error
		if len(lat)%2 == 0 {
			_, err = cs.CoreV1().ConfigMaps(enforce.Namespace).Create(ctx, enforce, metav1.CreateOptions{})
		} else {
			err = cs.CoreV1().ConfigMaps(enforce.Namespace).Delete(ctx, enforce.Name, metav1.DeleteOptions{})
		}
		require.NoError(t, err)
		written := time.Now()
		for platform() == before && time.Since(written) < floodWait {
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(written))
		if lat[len(lat)-1] >= floodWait {
			break // never served while the flood runs
		}
		time.Sleep(300 * time.Millisecond)
	}
	rate := float64(writes.Load()-w0) / time.Since(began).Seconds()
	anon, file := procStatus(t, p.PID(), "RssAnon"), procStatus(t, p.PID(), "RssFile")
	if profiles != "" { // the heap as the flood ends
		resp, err := http.Get("http://" + p.MetricsAddr + "/debug/pprof/heap")
		require.NoError(t, err)
		out, err := os.Create(filepath.Join(profiles, c.name+".heap.pprof"))
		require.NoError(t, err)
		_, err = io.Copy(out, resp.Body)
		require.NoError(t, errors.Join(err, resp.Body.Close(), out.Close()))
	}
	stop()
	wg.Wait()
	peak := vmHWMOf(t, p.PID())
	slices.Sort(lat)
	t.Logf("%s: %d namespaces of %d ConfigMaps of %d KiB, %d writers: %.0f writes/s (%d refused); %d Pods enforced, %d not, %d refused; %d reviews sent straight, %d admitted unenforced; "+
		"platform change served in median %v, p90 %v, max %v (%d changes); VmHWM %d MiB at start, %d MiB peak (limit %d MiB); "+
		"at the flood's end %d MiB anonymous, %d MiB file-backed (the binary)",
		c.name, c.tenants, c.configMaps, c.keys*c.padding>>10, c.writers, rate, failed.Load(), pods.Load(), unenforced.Load(), podErrs.Load(), reviews.Load(), reviewsUnenforced.Load(),
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*9/10].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), len(lat),
		startPeak>>20, peak>>20, floodMemoryLimit>>20, anon>>20, file>>20)
}

// metricWithLabel is the value of the series of a metric with label name=value.
func metricWithLabel(p *cluster.Podpatch, metric, name, value string) (float64, error) {
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	prefix := fmt.Sprintf("%s{%s=%q} ", metric, name, value)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}

// vmHWMOf is a process's peak resident memory, in bytes.
func vmHWMOf(t *testing.T, pid int) int64 { return procStatus(t, pid, "VmHWM") }

// procStatus is a field of a process's /proc/<pid>/status, in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("no %s", field)
	return 0
}
