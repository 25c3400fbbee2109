package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// exampleHandler is the handler with the example policies, and the Dask operator worker as its
// manager creates it.
func exampleHandler(b *testing.B) (*policies.Set, []byte, *Review) {
	cms, err := policyfiles.ReadConfigMaps([]string{"../manifests/examples"}, "default", nil)
	require.NoError(b, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(b, probs)
	raw, err := os.ReadFile("../policies/testdata/fixtures/dask-operator/worker-pod.yaml")
	require.NoError(b, err)
	docs, err := policies.SplitDocuments(bytes.NewReader(raw))
	require.NoError(b, err)
	h := &Review{Handler: &Mutator{Source: staticSource{snap: &policystore.Snapshot{Set: set}}, Metrics: newTestMetrics(b),
		PlatformNamespace: policies.DefaultPlatformNamespace}}
	return set, docs[0].JSON, h
}

// BenchmarkHandler measures one whole admission — AdmissionReview in, JSONPatch response out —
// for the Dask operator worker with the example policies (3 of them match it).
func BenchmarkHandler(b *testing.B) {
	_, worker, h := exampleHandler(b)
	body := review(b, "Pod", "default", admissionv1.Create, worker, false)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := serveMutate(h, body)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkHandlerUpdate measures one UPDATE admission (reference §5, "Enforce on updates") of
// the Dask operator worker as the example policies admitted it: "kept", a label of its own
// changed (the common update: both objects checked against the enforce policies, nothing put
// back); "restored", the enforced cost-center label removed (put back); "restored-partly-held",
// the same of a worker stored without the security baseline, so that each enforce policy is
// asked alone whether it held.
func BenchmarkHandlerUpdate(b *testing.B) {
	set, worker, h := exampleHandler(b)
	admitted, err := set.Apply(policies.Input{Kind: "Pod", Object: worker, Namespace: "default"})
	require.NoError(b, err)
	var pod map[string]any
	require.NoError(b, json.Unmarshal(admitted.Object, &pod))
	labels := pod["metadata"].(map[string]any)["labels"].(map[string]any)
	require.NotEmpty(b, labels["cost-center"], "the examples enforce a cost-center label")
	spec := pod["spec"].(map[string]any)
	require.NotNil(b, spec["securityContext"], "the examples enforce a pod securityContext")
	for _, bc := range []struct {
		name    string
		edit    func(labels map[string]any)
		patched bool
		// partly: the object as stored lacks the security baseline's pod securityContext, so
		// that policy did not hold and each enforce policy is asked alone.
		partly bool
	}{
		{"kept", func(l map[string]any) { l["release"] = "2" }, false, false},
		{"restored", func(l map[string]any) { delete(l, "cost-center") }, true, false},
		{"restored-partly-held", func(l map[string]any) { delete(l, "cost-center") }, true, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			old := admitted.Object
			if bc.partly {
				sc := spec["securityContext"]
				delete(spec, "securityContext")
				old, err = json.Marshal(pod)
				require.NoError(b, err)
				defer func() { spec["securityContext"] = sc }()
			}
			edited := map[string]any{}
			for k, v := range labels {
				edited[k] = v
			}
			bc.edit(edited)
			pod["metadata"].(map[string]any)["labels"] = edited
			updated, err := json.Marshal(pod)
			require.NoError(b, err)
			pod["metadata"].(map[string]any)["labels"] = labels
			var ar admissionv1.AdmissionReview
			require.NoError(b, json.Unmarshal(review(b, "Pod", "default", admissionv1.Update, updated, false), &ar))
			ar.Request.OldObject.Raw = old
			body, err := json.Marshal(ar)
			require.NoError(b, err)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				rec := serveMutate(h, body)
				if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"patch"`) != bc.patched ||
					strings.Contains(rec.Body.String(), "does not hold") != bc.partly {
					b.Fatal(rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// BenchmarkConcurrentMaxReviews sends 8 maximum-size reviews at once, and 16 ordinary ones
// meanwhile, to the handler as `podpatch serve` wires it — default slots, room and budget —
// over HTTPS, and reports the process's peak RSS and heap during the run (the figures to hold
// against the manifests' 256 Mi memory limit) and how many reviews of each kind were patched.
// The policies are the examples, or the examples and 32 namespace policies that each set a
// label and an env var on every container; the large reviews a Dask worker padded with env
// (one container) or made of containers of 170 bytes each (18,500 in 3 MiB), at etcd's
// 3 MiB and at podpatch's 4 MiB cap.
//
//	go test ./webhook -run '^$' -bench ConcurrentMaxReviews -benchtime 20x
func BenchmarkConcurrentMaxReviews(b *testing.B) {
	const concurrent, ordinary = 8, 16
	examples, err := policyfiles.ReadConfigMaps([]string{"../manifests/examples"}, "default", nil)
	require.NoError(b, err)
	for _, bc := range []struct {
		name       string
		nsPolicies int
		size       int
		containers bool
	}{
		{"policies=examples/review=4MiB/shape=env", 0, slots.MaxObjectSize - 4096, false},
		{"policies=examples+32ns/review=3MiB/shape=containers", policies.MaxNamespacePolicies - 1, 3 << 20, true},
		{"policies=examples+32ns/review=4MiB/shape=containers", policies.MaxNamespacePolicies - 1, slots.MaxObjectSize - 4096, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := newTestMetrics(b)
			store := policystore.New(policies.DefaultOptions(), newStoreMetrics(b), nil)
			for _, cm := range examples {
				require.Empty(b, store.Upsert(cm.ConfigMap))
			}
			for i := range bc.nsPolicies {
				require.Empty(b, store.Upsert(policyCM("default", fmt.Sprintf("team-%02d", i), fmt.Sprintf(everyContainerPolicy, i))))
			}
			store.MarkSynced()
			h := NewHandler(HandlerOptions{Store: store, Policies: policies.DefaultOptions(), Metrics: m,
				RequestBudget: DefaultRequestBudget, MaxInFlight: DefaultMaxInFlight,
				LargeBodyBytes: slots.LargeBytesFor(manifestMemoryLimit), Log: logr.Discard()})
			srv := httptest.NewTLSServer(h)
			defer srv.Close()
			client := srv.Client()
			client.Transport.(*http.Transport).MaxIdleConnsPerHost = concurrent + ordinary
			var pod []byte
			if bc.containers {
				pod = manyContainersPod(b, bc.size)
			} else {
				pod = maxSizePod(b, bc.size)
			}
			body := review(b, "Pod", "default", admissionv1.Create, pod, false)
			require.LessOrEqual(b, len(body), slots.MaxObjectSize)
			small := review(b, "Pod", "default", admissionv1.Create, []byte(workerPod), false)

			send := func(body []byte) (bool, error) {
				resp, err := client.Post(srv.URL+"/mutate", "application/json", bytes.NewReader(body))
				if err != nil {
					return false, err
				}
				defer resp.Body.Close()
				var out admissionv1.AdmissionReview
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					return false, err
				}
				if out.Response == nil || !out.Response.Allowed {
					return false, fmt.Errorf("not allowed: %+v", out.Response)
				}
				return len(out.Response.Patch) > 0, nil
			}
			_, err := send(small) // warm the connections and the policies
			require.NoError(b, err)

			underServeMemoryLimit(b)
			peakHeap := sampleMax(b, "/memory/classes/heap/objects:bytes")
			peakLive := sampleMax(b, "/gc/heap/live:bytes")
			round := &reviewRound{send: send, large: body, concurrent: concurrent, small: small, ordinary: ordinary}
			b.ResetTimer()
			for b.Loop() {
				round.run(b)
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(peakHeap())/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peakLive())/(1<<20), "peak-live-heap-MiB")
			b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(round.largeOK.Load())/n, "large-patched/8")
			b.ReportMetric(float64(round.ordinaryOK.Load())/n, "ordinary-patched/16")
			b.ReportMetric(float64(len(body))/(1<<20), "review-MiB")
		})
	}
}

// underServeMemoryLimit sets, until the benchmark ends, the soft memory limit `podpatch serve`
// sets from the manifests' 256 Mi limit, and starts from a collected heap and a reset peak RSS.
func underServeMemoryLimit(b *testing.B) {
	prev := debug.SetMemoryLimit(-1)
	SetSoftMemoryLimit(manifestMemoryLimit, logr.Discard())
	b.Cleanup(func() { debug.SetMemoryLimit(prev) })
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS(b)
}

// reviewRound is one round of the concurrent benchmarks: concurrent large reviews at once, and
// ordinary small ones sent meanwhile, spread over them. It counts the answers send found ok.
type reviewRound struct {
	send                 func(body []byte) (ok bool, err error)
	large, small         []byte
	concurrent, ordinary int
	largeOK, ordinaryOK  atomic.Int64
}

// run sends one round and fails the benchmark on any error.
func (r *reviewRound) run(b *testing.B) {
	var wg sync.WaitGroup
	errs := make(chan error, r.concurrent+r.ordinary)
	for range r.concurrent {
		wg.Go(func() {
			ok, err := r.send(r.large)
			if ok {
				r.largeOK.Add(1)
			}
			errs <- err
		})
	}
	for i := range r.ordinary {
		time.Sleep(time.Duration(i%4) * 5 * time.Millisecond) // spread over the large ones
		wg.Go(func() {
			ok, err := r.send(r.small)
			if ok {
				r.ordinaryOK.Add(1)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// everyContainerPolicy is a namespace policy (%d: its number) that sets a label and an env var
// on every container of a Dask worker.
const everyContainerPolicy = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: every-container}
spec:
  match: {managers: [dask], roles: [worker]}
  template:
    metadata:
      labels: {team-%[1]d: "yes"}
    spec:
      containers:
        - name: "*"
          env:
            - {name: TEAM_%[1]d, value: "a value of this team's"}
`

// manyContainersPod is a Dask worker of at most size bytes made of as many containers of some
// 170 bytes (a name, an image, an env var, requests) as fit.
func manyContainersPod(t testing.TB, size int) []byte {
	t.Helper()
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(workerPod), &pod))
	base := pod.Spec.Containers[0]
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	c := func(i int) corev1.Container {
		return corev1.Container{Name: fmt.Sprintf("c-%06d", i), Image: base.Image,
			Env: []corev1.EnvVar{{Name: "DASK_WORKER_ID", Value: fmt.Sprintf("worker-%06d", i)}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}}
	}
	one, err := json.Marshal(c(0))
	require.NoError(t, err)
	for i := 1; len(raw)+(len(one)+1)*i+64 < size; i++ {
		pod.Spec.Containers = append(pod.Spec.Containers, c(i))
	}
	raw, err = json.Marshal(pod)
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), size)
	return raw
}

// manifestMemoryLimit is the container memory limit of manifests/base/deployment.yaml.
const manifestMemoryLimit = 256 << 20

// resetPeakRSS resets the kernel's high-water mark of the process's RSS (VmHWM).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// peakRSS reads VmHWM, the process's peak RSS since resetPeakRSS, in bytes.
func peakRSS(b *testing.B) int64 {
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(b, err)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// sampleMax samples a runtime/metrics value every millisecond until the benchmark ends and
// returns a function giving the largest value seen.
func sampleMax(b *testing.B, name string) func() uint64 {
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: name}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	end := func() { once.Do(func() { close(stop); <-done }) }
	b.Cleanup(end)
	return func() uint64 { end(); return peak.Load() }
}
