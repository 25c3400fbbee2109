package bench_test

// Benchmarks of podpatch's request path, stage by stage and whole, on the Dask worker Pod with
// 1 and 10 containers and with 5, 1,000 and 10,000 loaded policies; the same ServeHTTP path
// with the reference handlers (allow-only, idiomatic) and the "read only what you need" floor;
// and the cost of loading a policy set. hack/bench.sh runs them and puts them in
// docs/benchmarks/benchmarks.md:
//
//	go test ./test/bench -run '^$' -bench . -benchmem
//
// Every benchmark reports cpu-ns/op next to ns/op: the process CPU time (getrusage, every
// thread, so garbage collection included) divided by the iterations; and other-cpus, how many
// CPUs other processes kept busy meanwhile.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/bench"
	"github.com/podpatch/podpatch/test/bench/reference"
	"github.com/podpatch/podpatch/webhook"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

var tmpRoot string

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // admission.Webhook logs through controller-runtime
	var err error
	if tmpRoot, err = os.MkdirTemp("", "podpatch-bench-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// policySet is a generated policy directory and the store `podpatch serve --policy-dir`
// would build from it.
type policySet struct {
	dir   string
	set   *policies.Set
	store *policystore.Store
}

var (
	setsMu sync.Mutex
	sets   = map[int]*policySet{}
)

// loadSet generates the n-policy set once per test binary and loads it through the directory
// feed of `podpatch serve --policy-dir`.
func loadSet(tb testing.TB, n int) *policySet {
	tb.Helper()
	setsMu.Lock()
	defer setsMu.Unlock()
	if s, ok := sets[n]; ok {
		return s
	}
	dir := filepath.Join(tmpRoot, fmt.Sprintf("policies-%d", n))
	if err := bench.WritePolicySet(dir, n); err != nil {
		tb.Fatal(err)
	}
	set, err := bench.LoadPolicySet(dir)
	if err != nil {
		tb.Fatal(err)
	}
	m, err := policystore.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	feed, store := policystore.NewDirFeed(dir, time.Hour, policies.DefaultOptions(), m, logr.Discard())
	if err := feed.Load(); err != nil {
		tb.Fatal(err)
	}
	s := &policySet{dir: dir, set: set, store: store}
	sets[n] = s
	return s
}

// releaseSet forgets a loaded set, so that the next one is measured with a heap like a
// server's, holding one set.
func releaseSet(n int) {
	setsMu.Lock()
	delete(sets, n)
	setsMu.Unlock()
	runtime.GC()
}

func workerPod(tb testing.TB, containers int) (pod, review []byte) {
	tb.Helper()
	pod, err := bench.WorkerPod(root, containers)
	if err != nil {
		tb.Fatal(err)
	}
	if review, err = bench.Review(pod); err != nil {
		tb.Fatal(err)
	}
	return pod, review
}

// mutator is podpatch's /mutate handler built as webhook.NewHandler builds it (webhook/handler.go:
// webhook.Review serving webhook.Mutator, without the routing). If NewHandler changes,
// change this function with it.
func mutator(tb testing.TB, s *policySet) http.Handler {
	tb.Helper()
	m, err := webhook.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	return &webhook.Review{Name: "mutate", Log: logr.Discard(), Budget: webhook.DefaultRequestBudget, Slots: slots.New(slots.Options{MaxInFlight: webhook.DefaultMaxInFlight}), Metrics: m,
		Handler: &webhook.Mutator{Source: s.store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
}

// serve runs one AdmissionReview through h as the webhook server would.
func serve(h http.Handler, review []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(review))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// checkServe fails unless h answers the review with an allowed response.
func checkServe(tb testing.TB, h http.Handler, review []byte) *admissionv1.AdmissionResponse {
	tb.Helper()
	rec := serve(h, review)
	if rec.Code != http.StatusOK {
		tb.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	resp, err := bench.ReviewResponse(rec.Body.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return resp
}

// cpuTime is the CPU time of the process so far, every thread.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f as the benchmark body and reports allocations, CPU time per op, and how many
// CPUs other processes kept busy meanwhile (other-cpus: the machine's other load).
func loop(b *testing.B, f func() error) {
	b.Helper()
	b.ReportAllocs()
	busy0, err := bench.MachineBusy()
	if err != nil {
		b.Fatal(err)
	}
	t0, cpu0 := time.Now(), cpuTime(b)
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	cpu, wall := cpuTime(b)-cpu0, time.Since(t0)
	busy1, err := bench.MachineBusy()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(max(0, (busy1-busy0-cpu).Seconds()/wall.Seconds()), "other-cpus")
}

// admissionCodec decodes AdmissionReviews as controller-runtime's admission.Webhook does.
var admissionCodec = func() k8sruntime.Decoder {
	s := k8sruntime.NewScheme()
	if err := admissionv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// BenchmarkStages measures the stages of the request path on their own:
//
//   - decode: the AdmissionReview with encoding/json, as webhook.Review does;
//     decode-codec: with controller-runtime's apimachinery codec, as admission.Webhook does;
//   - apply: policies.Set.Apply as webhook.Mutator calls it (recognise, select, merge and the
//     JSONPatch, Set.Patch); apply-object: as `podpatch render` calls it (the patched object);
//   - diff: jsonpatch.CreatePatch from the object to the patched object, which is what
//     admission.PatchResponseFromRaw does (the idiomatic way, and podpatch's before Apply
//     returned the patch);
//   - encode: Response.Complete and the JSON encoding of the answer.
func BenchmarkStages(b *testing.B) {
	for _, n := range bench.PolicyCounts {
		for _, c := range bench.ContainerCounts {
			b.Run(fmt.Sprintf("policies=%d/containers=%d", n, c), func(b *testing.B) {
				s := loadSet(b, n)
				pod, review := workerPod(b, c)
				in := policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: bench.Namespace}
				res, err := s.set.Apply(in)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Applied) != 5 {
					b.Fatalf("%d policies applied, want 5", len(res.Applied))
				}
				pres, err := s.set.Patch(in)
				if err != nil {
					b.Fatal(err)
				}
				if len(pres.Patch) == 0 {
					b.Fatal("Apply returned no patch")
				}
				req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "6f1d6c1e"}}

				b.Run("decode", func(b *testing.B) {
					loop(b, func() error {
						var ar admissionv1.AdmissionReview
						return json.Unmarshal(review, &ar)
					})
				})
				b.Run("decode-codec", func(b *testing.B) {
					loop(b, func() error {
						var ar admissionv1.AdmissionReview
						_, _, err := admissionCodec.Decode(review, nil, &ar)
						return err
					})
				})
				b.Run("apply", func(b *testing.B) {
					loop(b, func() error {
						_, err := s.set.Patch(in)
						return err
					})
				})
				b.Run("apply-object", func(b *testing.B) {
					loop(b, func() error {
						_, err := s.set.Apply(in)
						return err
					})
				})
				b.Run("diff", func(b *testing.B) {
					loop(b, func() error {
						_, err := jsonpatch.CreatePatch(pod, res.Object)
						return err
					})
				})
				b.Run("encode", func(b *testing.B) {
					pt := admissionv1.PatchTypeJSONPatch
					loop(b, func() error {
						resp := admission.Allowed("")
						resp.Patch, resp.PatchType = pres.Patch, &pt
						if err := resp.Complete(req); err != nil {
							return err
						}
						ar := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
						ar.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
						return json.NewEncoder(io.Discard).Encode(ar)
					})
				})
			})
		}
		releaseSet(n)
	}
}

// BenchmarkHandler measures podpatch's whole handler: ServeHTTP of a full AdmissionReview
// body by the handler `podpatch serve` registers at /mutate, into an httptest recorder.
func BenchmarkHandler(b *testing.B) {
	for _, n := range bench.PolicyCounts {
		for _, c := range bench.ContainerCounts {
			b.Run(fmt.Sprintf("policies=%d/containers=%d", n, c), func(b *testing.B) {
				h := mutator(b, loadSet(b, n))
				_, review := workerPod(b, c)
				if resp := checkServe(b, h, review); len(resp.Patch) == 0 {
					b.Fatal("podpatch did not patch the worker")
				}
				loop(b, func() error {
					if rec := serve(h, review); rec.Code != http.StatusOK {
						return fmt.Errorf("status %d", rec.Code)
					}
					return nil
				})
			})
		}
		releaseSet(n)
	}
}

// BenchmarkReference measures the reference handlers the same way: allow (no patch) and
// idiomatic (typed decode, strategic merge, CreatePatch of the whole object) behind
// controller-runtime's admission.Webhook, as their servers run them; floor, the "read only
// what you need" handler, a plain http.Handler; and floor-cr, the floor's handler
// behind admission.Webhook.
func BenchmarkReference(b *testing.B) {
	idiomatic, err := reference.NewIdiomatic()
	if err != nil {
		b.Fatal(err)
	}
	handlers := []struct {
		name    string
		handler http.Handler
		patches bool
	}{
		{"allow", &admission.Webhook{Handler: reference.Allow{}}, false},
		{"idiomatic", &admission.Webhook{Handler: idiomatic}, true},
		{"floor", floorHTTP{}, true},
		{"floor-cr", &admission.Webhook{Handler: floor{}}, true},
	}
	for _, c := range bench.ContainerCounts {
		for _, r := range handlers {
			b.Run(fmt.Sprintf("containers=%d/%s", c, r.name), func(b *testing.B) {
				_, review := workerPod(b, c)
				if resp := checkServe(b, r.handler, review); (len(resp.Patch) > 0) != r.patches {
					b.Fatalf("patch %s, want patch: %v", resp.Patch, r.patches)
				}
				loop(b, func() error {
					if rec := serve(r.handler, review); rec.Code != http.StatusOK {
						return fmt.Errorf("status %d", rec.Code)
					}
					return nil
				})
			})
		}
	}
}

// BenchmarkLoad measures what happens when policies change, not per request: reading the
// policy ConfigMap files and compiling them into a Set.
func BenchmarkLoad(b *testing.B) {
	for _, n := range bench.PolicyCounts {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			s := loadSet(b, n)
			loop(b, func() error {
				_, err := bench.LoadPolicySet(s.dir)
				return err
			})
		})
		releaseSet(n)
	}
}

// floorPod is all of a Pod the floor reads.
type floorPod struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Containers []struct {
			Name string `json:"name"`
		} `json:"containers"`
	} `json:"spec"`
}

// floorPatch is the floor's answer for a Dask worker: three operations.
func floorPatch(pod *floorPod) []jsonpatch.Operation {
	if pod.Metadata.Labels["dask.org/component"] != "worker" || len(pod.Spec.Containers) == 0 {
		return nil
	}
	return []jsonpatch.Operation{
		jsonpatch.NewOperation("add", "/metadata/labels/cost-center", "data-platform"),
		jsonpatch.NewOperation("add", "/spec/nodeSelector", map[string]string{"node-pool": "dask-workers"}),
		jsonpatch.NewOperation("add", "/metadata/annotations/podpatch.io~1applied", "podpatch-system/cost-center/cost-center"),
	}
}

// floorHTTP is the "read only what you need" floor: one encoding/json decode of the
// review into a struct holding only the request's uid, the labels and the container names, and
// an answer with the three operations it changes.
type floorHTTP struct{}

func (floorHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 7<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review struct {
		metav1.TypeMeta `json:",inline"`
		Request         *struct {
			UID    types.UID `json:"uid"`
			Object floorPod  `json:"object"`
		} `json:"request"`
	}
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "bad review", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	if ops := floorPatch(&review.Request.Object); ops != nil {
		if resp.Patch, err = json.Marshal(ops); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// floor is the floor's handler as an admission.Handler, for admission.Webhook.
type floor struct{}

func (floor) Handle(_ context.Context, req admission.Request) admission.Response {
	var pod floorPod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if ops := floorPatch(&pod); ops != nil {
		return admission.Patched("", ops...)
	}
	return admission.Allowed("")
}

// TestIdiomaticMakesPodpatchsChange checks, in process, that the idiomatic reference changes
// the worker exactly as podpatch's five policies do (apart from podpatch's provenance
// annotation), so comparing their costs is fair. hack/bench.sh checks it again over HTTPS.
func TestIdiomaticMakesPodpatchsChange(t *testing.T) {
	idiomatic, err := reference.NewIdiomatic()
	if err != nil {
		t.Fatal(err)
	}
	pp := mutator(t, loadSet(t, 5))
	ref := &admission.Webhook{Handler: idiomatic}
	for _, c := range bench.ContainerCounts {
		t.Run(fmt.Sprintf("containers=%d", c), func(t *testing.T) {
			pod, review := workerPod(t, c)
			a, err := bench.PatchedPod(pod, checkServe(t, pp, review))
			if err != nil {
				t.Fatal(err)
			}
			b, err := bench.PatchedPod(pod, checkServe(t, ref, review))
			if err != nil {
				t.Fatal(err)
			}
			diff, err := bench.SameChange(a, b)
			if err != nil {
				t.Fatal(err)
			}
			if diff != "" {
				t.Fatalf("the idiomatic reference changes the worker differently:\n%s", diff)
			}
		})
	}
}
