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
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podpatch/podpatch/policies"
)

// BenchmarkHandler measures one whole admission — AdmissionReview in, JSONPatch response out —
// for the Dask operator worker with the example policies (3 of them match it).
func BenchmarkHandler(b *testing.B) {
	cms, err := policies.ReadConfigMapFiles([]string{"../manifests/examples"}, "default", nil)
	require.NoError(b, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(b, probs)
	raw, err := os.ReadFile("../policies/testdata/fixtures/dask-operator/worker-pod.yaml")
	require.NoError(b, err)
	docs, err := policies.SplitDocuments(bytes.NewReader(raw))
	require.NoError(b, err)
	m := newTestMetrics(b)
	h := &Review{Handler: &Mutator{Source: staticSource{snap: &Snapshot{Set: set}}, Metrics: m,
		PlatformNamespace: policies.DefaultPlatformNamespace}}
	body := review(b, "Pod", "default", admissionv1.Create, docs[0].JSON, false)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkConcurrentMaxReviews sends 8 maximum-size reviews at once (a Dask worker padded to
// just under maxReviewSize, with the example policies) to the handler as `podpatch serve` wires
// it — 8 slots, the default budget — over HTTPS, and reports the process's peak RSS and heap
// during the run: the figure to hold against the manifests' 256 Mi memory limit.
//
//	go test ./webhook -run '^$' -bench ConcurrentMaxReviews -benchtime 20x
func BenchmarkConcurrentMaxReviews(b *testing.B) {
	const concurrent = 8
	cms, err := policies.ReadConfigMapFiles([]string{"../manifests/examples"}, "default", nil)
	require.NoError(b, err)
	set, probs := policies.Compile(cms, policies.DefaultOptions())
	require.Empty(b, probs)
	m := newTestMetrics(b)
	h := &Review{Name: "mutate", Budget: DefaultRequestBudget, Slots: NewSlots(SlotOptions{MaxInFlight: DefaultMaxInFlight}), Metrics: m,
		Handler: &Mutator{Source: staticSource{snap: &Snapshot{Set: set}}, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = concurrent
	body := review(b, "Pod", "default", admissionv1.Create, maxSizePod(b, maxReviewSize-4096), false)
	require.LessOrEqual(b, len(body), maxReviewSize)

	send := func() error {
		resp, err := client.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return err
		}
		if out.Response == nil || len(out.Response.Patch) == 0 {
			return fmt.Errorf("not patched: %+v", out.Response)
		}
		return nil
	}
	require.NoError(b, send()) // warm the connections and the policies

	// The soft memory limit `podpatch serve` sets from the manifests' 256 Mi limit.
	prev := debug.SetMemoryLimit(-1)
	SetMemoryLimit(manifestMemoryLimit, logr.Discard())
	defer debug.SetMemoryLimit(prev)
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS(b)
	peakHeap := sampleMax(b, "/memory/classes/heap/objects:bytes")
	peakLive := sampleMax(b, "/gc/heap/live:bytes")
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, concurrent)
		for range concurrent {
			wg.Go(func() { errs <- send() })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(peakHeap())/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(peakLive())/(1<<20), "peak-live-heap-MiB")
	b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonBudgetExceeded)))+
		testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonOverloaded))), "fallbacks")
	b.ReportMetric(float64(len(body))/(1<<20), "review-MiB")
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
