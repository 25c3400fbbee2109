package webhook

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// teamStore serves the label policy of labelPolicy in namespace team-a.
func teamStore(t testing.TB) *policystore.Store {
	t.Helper()
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), nil)
	require.Empty(t, store.Upsert(policyCM("team-a", "labels", strings.Replace(labelPolicy, "%s", "a", 1))))
	store.MarkSynced()
	return store
}

// countingBody counts what the handler reads of a request body.
type countingBody struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingBody) Close() error { return nil }

// requireFallback checks an allowed-unchanged answer with one warning containing want.
func requireFallback(t *testing.T, rec *httptest.ResponseRecorder, resp *admissionv1.AdmissionResponse, uid, want string) {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotNil(t, resp)
	require.True(t, resp.Allowed)
	require.Empty(t, resp.Patch)
	require.Equal(t, types.UID(uid), resp.UID, "the API server rejects an answer without the request's uid")
	require.Len(t, resp.Warnings, 1)
	require.Contains(t, resp.Warnings[0], want)
}

// TestBudgetExceeded: a request whose budget is spent, or whose context the API server
// cancelled, is allowed unchanged with a warning and counted; the handler keeps serving.
func TestBudgetExceeded(t *testing.T) {
	m := newTestMetrics(t)
	store := teamStore(t)
	mutator := &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}
	body := review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false)

	t.Run("budget of 1ns", func(t *testing.T) {
		h := &Review{Name: "mutate", Handler: mutator, Budget: time.Nanosecond, Metrics: m}
		rec, resp := post(t, h, body, "application/json")
		requireFallback(t, rec, resp, "uid-Pod", "request budget ran out")
		require.Equal(t, 1.0, testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageHandle)))
		require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonBudgetExceeded))))
		require.Equal(t, 1.0, testutil.ToFloat64(m.admissions.WithLabelValues("Pod", "", "", "budget_exceeded")))
	})
	t.Run("request cancelled by the API server", func(t *testing.T) {
		h := &Review{Name: "mutate", Handler: mutator, Metrics: m} // no budget: only the request's context
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body)).WithContext(ctx)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
		requireFallback(t, rec, out.Response, "uid-Pod", "request budget ran out")
		require.Equal(t, 2.0, testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageHandle)))
	})
	t.Run("an answer after the budget is overruled", func(t *testing.T) {
		// Work stops at the budget: a handler that finishes after it, whatever it answers,
		// is replaced by the fallback.
		late := admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
			<-ctx.Done()
			return mutator.Handle(context.Background(), req) // a full, patched answer
		})
		h := &Review{Name: "mutate", Handler: fallbackHandler{late, mutator}, Budget: time.Millisecond, Metrics: m}
		rec, resp := post(t, h, body, "application/json")
		requireFallback(t, rec, resp, "uid-Pod", "request budget ran out")
	})
	t.Run("validate", func(t *testing.T) {
		bad := policyCM("team-a", "bad", strings.Replace(labelPolicy, "labels: {team: %s}", "labelz: {team: a}", 1))
		bad.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
		raw, err := json.Marshal(bad)
		require.NoError(t, err)
		h := &Review{Name: "validate", Handler: &Validator{Options: policies.DefaultOptions(), Metrics: m}, Budget: time.Nanosecond, Metrics: m}
		rec, resp := post(t, h, review(t, "ConfigMap", "team-a", admissionv1.Create, raw, false), "application/json")
		requireFallback(t, rec, resp, "uid-ConfigMap", "could not validate this policy ConfigMap in time")
		require.Equal(t, 1.0, testutil.ToFloat64(m.exceeded.WithLabelValues("validate", stageHandle)))
	})

	// Unbounded, the same request is patched.
	_, resp := post(t, &Review{Handler: mutator}, body, "application/json")
	require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"team":"a"`)
}

// fallbackHandler is a test handler with the Mutator's fallback.
type fallbackHandler struct {
	admission.Handler
	fb Fallback
}

func (h fallbackHandler) Fallback(req admission.Request, reason Reason) admission.Response {
	return h.fb.Fallback(req, reason)
}

// blocker holds a request slot: it is inside its handler until released.
type blocker struct {
	entered chan struct{}
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blocker) Handle(context.Context, admission.Request) admission.Response {
	b.entered <- struct{}{}
	<-b.release
	return admission.Allowed("")
}

// occupy takes the only handling slot of bounds, and its room for large bodies, with a large
// review held in its handler, and returns how to let it go (waiting until it is answered).
func occupy(t *testing.T, bounds *slots.Slots, m *Metrics) (b *blocker, big []byte, release func()) {
	t.Helper()
	b = newBlocker()
	busy := &Review{Name: "validate", Handler: b, Slots: bounds, Metrics: m}
	done := make(chan struct{})
	big = review(t, "Pod", "team-a", admissionv1.Create, maxSizePod(t, slots.MaxObjectSize-4096), false)
	go func() {
		defer close(done)
		post(t, busy, big, "application/json")
	}()
	<-b.entered
	return b, big, func() {
		close(b.release)
		<-done
	}
}

// TestOverloaded: when there is no room for a request's body for its whole budget, the
// request is allowed unchanged with a warning and counted, and only the head of its body is
// read; when its body is read but every handling slot stays busy, likewise.
func TestOverloaded(t *testing.T) {
	m := newTestMetrics(t)
	bounds := slots.New(slots.Options{MaxInFlight: 1, LargeBytes: 1}) // room for one large body
	_, big, release := occupy(t, bounds, m)                           // the only slot, and the room for large bodies, are taken
	require.Equal(t, 1.0, testutil.ToFloat64(m.inFlight))
	require.Equal(t, float64(len(big)+slots.ReservationOverhead), testutil.ToFloat64(m.bodyBytes.WithLabelValues("large")))

	h := &Review{Name: "mutate", Slots: bounds, Metrics: m, Budget: 10 * time.Millisecond,
		Handler: &Mutator{Source: teamStore(t), Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}}
	body := &countingBody{r: bytes.NewReader(big)}
	req := httptest.NewRequest(http.MethodPost, "/mutate", body)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	requireFallback(t, rec, out.Response, "uid-Pod", "overloaded")
	require.Equal(t, "admission.k8s.io/v1", out.APIVersion)
	require.LessOrEqual(t, body.n.Load(), int64(maxHeadSize), "a request without room must not read its body")
	require.Equal(t, 1.0, testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageWait)))
	require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonOverloaded))))

	// A client that puts the uid after the (large) object cannot be answered from the head:
	// 503, and the API server applies its failurePolicy.
	late := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"object":{"x":"` +
		strings.Repeat("a", slots.OrdinaryBody+maxHeadSize) + `"},"uid":"u"}}`)
	rec, resp := post(t, h, late, "application/json")
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.NotNil(t, resp)
	require.False(t, resp.Allowed)
	require.Equal(t, 2.0, testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageWait)))

	// An ordinary review has room, and is read, but finds no handling slot.
	rec, resp = post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
	requireFallback(t, rec, resp, "uid-Pod", "overloaded")
	require.Equal(t, 3.0, testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageWait)))
	require.Equal(t, 2.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(ReasonOverloaded))))

	release()
	require.Equal(t, 0.0, testutil.ToFloat64(m.inFlight))
	require.Equal(t, 0.0, testutil.ToFloat64(m.bodyBytes.WithLabelValues("large")), "the room is given back")
	require.Equal(t, 0.0, testutil.ToFloat64(m.bodyBytes.WithLabelValues("ordinary")))
	_, resp = post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
	require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"team":"a"`, "a free slot serves again")
}

// TestBodyTooLarge: a body larger than any review the API server sends is answered from its
// head, whether its length is announced or not (only the head read when it is): with the
// fallback when the head has the request's uid (reference §5; an HTTP 413 would make the API
// server apply failurePolicy Ignore), with 413 when it has none. The largest creation and the
// largest update (object and oldObject) are served.
func TestBodyTooLarge(t *testing.T) {
	h := &Review{Handler: &Mutator{Source: teamStore(t), Metrics: newTestMetrics(t)}}
	spaces := bytes.Repeat([]byte(" "), slots.MaxReviewSize+1)
	withUID := review(t, "Pod", "team-a", admissionv1.Create, maxSizePod(t, slots.MaxReviewSize+1), false)
	for _, c := range []struct {
		name string
		body []byte
	}{{"no uid", spaces}, {"uid", withUID}} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/chunked=%v", c.name, chunked), func(t *testing.T) {
				body := &countingBody{r: bytes.NewReader(c.body)}
				req := httptest.NewRequest(http.MethodPost, "/mutate", body)
				req.ContentLength = int64(len(c.body))
				if chunked {
					req.ContentLength = -1
				}
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				var out admissionv1.AdmissionReview
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
				if c.name == "uid" {
					requireFallback(t, rec, out.Response, "uid-Pod", "larger than it handles")
				} else {
					require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
					require.False(t, out.Response.Allowed)
					require.Contains(t, out.Response.Result.Message, fmt.Sprintf("request entity is too large; limit is %d bytes", slots.MaxReviewSize))
				}
				if !chunked {
					require.LessOrEqual(t, body.n.Load(), int64(maxHeadSize), "an announced length over the limit is answered from its head")
				} else {
					require.LessOrEqual(t, body.n.Load(), int64(slots.MaxReviewSize+1))
				}
			})
		}
	}
	// The largest accepted reviews are served: a creation, and an update of that object.
	pod := maxSizePod(t, slots.MaxObjectSize-4096)
	_, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, pod, false), "application/json")
	require.NotNil(t, resp)
	require.True(t, resp.Allowed)
	require.NotEmpty(t, resp.Patch)
	body := updateReview(t, "Pod", "", pod, pod)
	require.LessOrEqual(t, len(body), slots.MaxReviewSize)
	rec, resp := post(t, h, body, "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotNil(t, resp)
	require.True(t, resp.Allowed)
	require.Empty(t, resp.Warnings, "handled, not answered with the fallback")
}

// TestSlowBody: a client that sends half its body and stalls holds its room no longer than its
// read deadline (within the budget), and is answered from what it sent (over a real
// connection: the read deadline).
func TestSlowBody(t *testing.T) {
	m := newTestMetrics(t)
	h := &Review{Name: "mutate", Slots: slots.New(slots.Options{MaxInFlight: 1}), Metrics: m, Budget: 50 * time.Millisecond,
		Handler: &Mutator{Source: teamStore(t), Metrics: m}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /mutate HTTP/1.1\r\nHost: podpatch\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	_, err = conn.Write(body[:len(body)/2])
	require.NoError(t, err)
	r, err := http.ReadResponse(bufio.NewReader(conn), nil) // the rest never comes
	require.NoError(t, err)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(r.Body).Decode(&out))
	require.NoError(t, r.Body.Close())
	require.Equal(t, http.StatusOK, r.StatusCode)
	require.True(t, out.Response.Allowed)
	require.Equal(t, types.UID("uid-Pod"), out.Response.UID)
	require.Empty(t, out.Response.Patch)
	require.Contains(t, out.Response.Warnings[0], "request budget ran out")
	require.Equal(t, 1.0, testutil.ToFloat64(m.exceeded.WithLabelValues("mutate", stageRead)))

	// The room is free again.
	resp, err := http.Post(srv.URL+"/mutate", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NoError(t, resp.Body.Close())
	require.NotEmpty(t, out.Response.Patch)

	// A budget spent before the body is read (the read deadline is past): the head is still
	// read, for the uid, and the answer is the fallback, not an error.
	spent := httptest.NewServer(&Review{Name: "mutate", Metrics: m, Budget: time.Nanosecond,
		Handler: &Mutator{Source: teamStore(t), Metrics: m}})
	defer spent.Close()
	resp, err = http.Post(spent.URL+"/mutate", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	out = admissionv1.AdmissionReview{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, out.Response.Allowed)
	require.Equal(t, types.UID("uid-Pod"), out.Response.UID)
	require.Empty(t, out.Response.Patch)
}

// TestConcurrentLargeReviews sends twice as many maximum-size reviews as there are slots, at
// once: every one is patched, and no more than the slots are ever handled together.
func TestConcurrentLargeReviews(t *testing.T) {
	const handling, requests = 4, 8
	m := newTestMetrics(t)
	mutator := &Mutator{Source: teamStore(t), Metrics: m}
	var now, peak atomic.Int32
	counting := admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		n := now.Add(1)
		defer now.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return mutator.Handle(ctx, req)
	})
	h := &Review{Name: "mutate", Handler: counting, Slots: slots.New(slots.Options{MaxInFlight: handling, LargeBytes: 8 * slots.MaxObjectSize}), Metrics: m}
	pod := maxSizePod(t, slots.MaxObjectSize-4096)
	body := review(t, "Pod", "team-a", admissionv1.Create, pod, false)
	var wg sync.WaitGroup
	results := make([]*admissionv1.AdmissionResponse, requests)
	for i := range requests {
		wg.Go(func() {
			rec := serveMutate(h, body)
			var out admissionv1.AdmissionReview
			if json.Unmarshal(rec.Body.Bytes(), &out) == nil {
				results[i] = out.Response
			}
		})
	}
	wg.Wait()
	for i, resp := range results {
		require.NotNil(t, resp, "request %d", i)
		require.Contains(t, string(applyResponse(t, pod, resp)), `"team":"a"`, "request %d", i)
	}
	require.LessOrEqual(t, peak.Load(), int32(handling))
	require.Equal(t, float64(requests), testutil.ToFloat64(m.admissions.WithLabelValues("Pod", "dask", "worker", "patched")))
	require.Zero(t, testutil.CollectAndCount(m.exceeded))
	require.Equal(t, 0.0, testutil.ToFloat64(m.inFlight))
}

// maxSizePod is the Dask worker Pod of workerPod padded with environment variables to size
// bytes of JSON.
func maxSizePod(t testing.TB, size int) []byte {
	t.Helper()
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal([]byte(workerPod), &pod))
	value := strings.Repeat("v", 200)
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	entry := len(fmt.Sprintf(`{"name":"PAD_%07d","value":"%s"},`, 0, value))
	for i := 0; len(raw)+entry+64 < size; i++ { // 64: the env list's own brackets
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("PAD_%07d", i), Value: value})
		raw = append(raw, make([]byte, entry)...) // account without re-encoding every time
	}
	raw, err = json.Marshal(pod)
	require.NoError(t, err)
	require.LessOrEqual(t, len(raw), size)
	return raw
}
