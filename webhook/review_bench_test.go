package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// BenchmarkMaxUpdateReview measures the heap one review of the largest kind takes while it is
// handled, per byte of its body: a creation of slots.MaxObjectSize (every layer applies: the
// examples and 31 namespace policies on each of its containers), against an update whose two
// objects are each up to slots.MaxObjectSize (only the platform's enforce policies apply:
// "kept", a label of its own changed; "restored", the update undid what they set in every
// container). It is why a body over slots.MaxObjectSize reserves as the largest creation does
// (slots.Slots): an update's body costs the engine a fraction of what a creation's does.
//
//	go test ./webhook -run '^$' -bench MaxUpdateReview -benchtime 5x
func BenchmarkMaxUpdateReview(b *testing.B) {
	examples, err := policyfiles.ReadConfigMaps([]string{"../manifests/examples"}, "default", nil)
	require.NoError(b, err)
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(b), nil)
	for _, cm := range examples {
		require.Empty(b, store.Upsert(cm.ConfigMap))
	}
	for i := range policies.MaxNamespacePolicies - 1 {
		require.Empty(b, store.Upsert(policyCM("default", fmt.Sprintf("team-%02d", i), fmt.Sprintf(everyContainerPolicy, i))))
	}
	store.MarkSynced()
	h := NewHandler(HandlerOptions{Store: store, Policies: policies.DefaultOptions(), Metrics: newTestMetrics(b), Log: logr.Discard()})

	// The largest worker that, as admitted, is at most slots.MaxObjectSize.
	set := store.Snapshot().Set
	var pod, admitted []byte
	for size := slots.MaxObjectSize; ; size -= 128 << 10 {
		pod = manyContainersPod(b, size)
		res, err := set.Apply(policies.Input{Kind: "Pod", Object: pod, Namespace: "default"})
		require.NoError(b, err)
		if admitted = res.Object; len(admitted) <= slots.MaxObjectSize {
			break
		}
	}
	relabelled := bytes.Replace(admitted, []byte(`"labels":{`), []byte(`"labels":{"release":"2",`), 1)
	update := func(obj []byte) []byte {
		var ar admissionv1.AdmissionReview
		require.NoError(b, json.Unmarshal(review(b, "Pod", "default", admissionv1.Update, obj, false), &ar))
		ar.Request.OldObject.Raw = admitted
		body, err := json.Marshal(ar)
		require.NoError(b, err)
		return body
	}
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"create", review(b, "Pod", "default", admissionv1.Create, manyContainersPod(b, slots.MaxObjectSize-4096), false)},
		{"update/kept", update(relabelled)},
		{"update/restored", update(pod)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			require.LessOrEqual(b, len(bc.body), slots.MaxReviewSize)
			var peak uint64
			for b.Loop() {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				heap := sampleMax(b, "/memory/classes/heap/objects:bytes")
				rec := serveMutate(h, bc.body)
				if rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte("larger than it handles")) {
					b.Fatal(rec.Code, rec.Body.String()[:min(rec.Body.Len(), 300)])
				}
				peak = max(peak, heap()-before.HeapAlloc)
			}
			b.ReportMetric(float64(len(bc.body))/(1<<20), "review-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peak)/float64(len(bc.body)), "peak-heap/body")
		})
	}
}

// BenchmarkConcurrentMaxUpdates is BenchmarkConcurrentMaxReviews for updates: 8 updates of the
// largest Dask worker (its two objects each up to slots.MaxObjectSize, the review within
// slots.MaxReviewSize) at once, and 16 ordinary creations meanwhile, to the handler as `podpatch
// serve` wires it over HTTPS, under the soft memory limit of the manifests' 256 Mi: the peak RSS
// to hold against that limit, and how many of each were handled (not answered with the
// fallback).
//
//	go test ./webhook -run '^$' -bench ConcurrentMaxUpdates -benchtime 10x
func BenchmarkConcurrentMaxUpdates(b *testing.B) {
	const concurrent, ordinary = 8, 16
	examples, err := policyfiles.ReadConfigMaps([]string{"../manifests/examples"}, "default", nil)
	require.NoError(b, err)
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(b), nil)
	for _, cm := range examples {
		require.Empty(b, store.Upsert(cm.ConfigMap))
	}
	store.MarkSynced()
	h := NewHandler(HandlerOptions{Store: store, Policies: policies.DefaultOptions(), Metrics: newTestMetrics(b),
		RequestBudget: DefaultRequestBudget, MaxInFlight: DefaultMaxInFlight, LargeBodyBytes: slots.LargeBytesFor(manifestMemoryLimit), Log: logr.Discard()})
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = concurrent + ordinary

	for _, shape := range []string{"env", "containers"} {
		b.Run("shape="+shape, func(b *testing.B) {
			var admitted []byte
			for size := slots.MaxObjectSize - 4096; ; size -= 128 << 10 {
				pod := maxSizePod(b, size)
				if shape == "containers" {
					pod = manyContainersPod(b, size)
				}
				res, err := store.Snapshot().Set.Apply(policies.Input{Kind: "Pod", Object: pod, Namespace: "default"})
				require.NoError(b, err)
				if admitted = res.Object; len(admitted) <= slots.MaxObjectSize {
					break
				}
			}
			var ar admissionv1.AdmissionReview
			require.NoError(b, json.Unmarshal(review(b, "Pod", "default", admissionv1.Update,
				bytes.Replace(admitted, []byte(`"labels":{`), []byte(`"labels":{"release":"2",`), 1), false), &ar))
			ar.Request.OldObject.Raw = admitted
			body, err := json.Marshal(ar)
			require.NoError(b, err)
			require.Greater(b, len(body), slots.MaxObjectSize)
			require.LessOrEqual(b, len(body), slots.MaxReviewSize)
			small := review(b, "Pod", "default", admissionv1.Create, []byte(workerPod), false)
			send := func(body []byte) (handled bool, err error) {
				resp, err := client.Post(srv.URL+"/mutate", "application/json", bytes.NewReader(body))
				if err != nil {
					return false, err
				}
				defer resp.Body.Close()
				var out admissionv1.AdmissionReview
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
					return false, err
				}
				if resp.StatusCode != http.StatusOK || out.Response == nil {
					return false, fmt.Errorf("HTTP %d", resp.StatusCode)
				}
				return out.Response.Allowed, nil // denied: the fallback (429), as no policy conflicts
			}
			_, err = send(small)
			require.NoError(b, err)

			underServeMemoryLimit(b)
			peakHeap := sampleMax(b, "/memory/classes/heap/objects:bytes")
			round := &reviewRound{send: send, large: body, concurrent: concurrent, small: small, ordinary: ordinary}
			b.ResetTimer()
			for b.Loop() {
				round.run(b)
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(peakHeap())/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(round.largeOK.Load())/n, "large-handled/8")
			b.ReportMetric(float64(round.ordinaryOK.Load())/n, "ordinary-handled/16")
			b.ReportMetric(float64(len(body))/(1<<20), "review-MiB")
		})
	}
}
