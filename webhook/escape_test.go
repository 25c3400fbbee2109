package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/webhook/policystore"
	"github.com/podpatch/podpatch/webhook/slots"
)

// No escape through the plumbing (reference §5): whatever stops podpatch from handling a review
// that carries a uid — its size, its shape, a bound of the engine, a panic — the answer is an
// admission response with that uid (an HTTP error would make the API server apply
// failurePolicy Ignore, and admit the write unchanged), denied when the platform's enforce
// policy could bind the object, allowed with a warning when none could.

// baselinePolicy is the platform's enforce policy of these tests: Dask workers in team-a get a
// label and allowPrivilegeEscalation: false in every container (ephemeral ones included).
const baselinePolicy = `apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: baseline}
spec:
  mode: enforce
  match: {managers: [dask], namespaces: [team-a]}
  template:
    metadata:
      labels: {baseline: applied}
    spec:
      containers:
        - name: "*"
          securityContext: {allowPrivilegeEscalation: false}
`

// everyEnvPolicy is a platform merge policy that sets 20 env vars in every container of a Dask
// worker, everywhere: with thousands of containers, beyond the engine's bound of work.
func everyEnvPolicy() string {
	var env []string
	for i := range 20 {
		env = append(env, fmt.Sprintf("{name: E%02d, value: a-value-of-this-policy}", i))
	}
	return "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: env}\nspec:\n  match: {managers: [dask]}\n" +
		"  template: {spec: {containers: [{name: '*', env: [" + strings.Join(env, ", ") + "]}]}}\n"
}

// escapeStore serves baselinePolicy and everyEnvPolicy.
func escapeStore(t testing.TB) *policystore.Store {
	t.Helper()
	store := policystore.New(policies.DefaultOptions(), newStoreMetrics(t), nil)
	require.Empty(t, store.Upsert(policyCM(policies.DefaultPlatformNamespace, "baseline", baselinePolicy)))
	require.Empty(t, store.Upsert(policyCM(policies.DefaultPlatformNamespace, "env", everyEnvPolicy())))
	store.MarkSynced()
	return store
}

// podReview is a review of a Pod in ns with the given uid: an update (of sub, when set) when old
// is set. An object "@deep" is spliced in after encoding, as text.
func podReview(t testing.TB, uid types.UID, ns string, op admissionv1.Operation, sub string, obj, old []byte) []byte {
	t.Helper()
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: uid, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: sub, Namespace: ns, Operation: op,
			Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old}},
	}
	b, err := json.Marshal(ar)
	require.NoError(t, err)
	return b
}

// admittedWorker is the Dask worker of workerPod as the store admitted it in ns.
func admittedWorker(t testing.TB, store *policystore.Store, ns string) []byte {
	t.Helper()
	res, err := store.Snapshot().Set.Apply(policies.Input{Kind: "Pod", Object: []byte(workerPod), Namespace: ns})
	require.NoError(t, err)
	return res.Object
}

// withDebugContainers is pod with n privileged ephemeral containers added (kubectl debug
// --profile=sysadmin, n times at once).
func withDebugContainers(t testing.TB, pod []byte, n int) []byte {
	t.Helper()
	var p corev1.Pod
	require.NoError(t, json.Unmarshal(pod, &p))
	privileged := true
	for i := range n {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: fmt.Sprintf("debugger-%03d", i), Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: &privileged}}})
	}
	out, err := json.Marshal(p)
	require.NoError(t, err)
	return out
}

// withoutLabels is pod with no labels: no longer one of a manager's.
func withoutLabels(t testing.TB, pod []byte) []byte {
	t.Helper()
	var p map[string]any
	require.NoError(t, json.Unmarshal(pod, &p))
	delete(p["metadata"].(map[string]any), "labels")
	out, err := json.Marshal(p)
	require.NoError(t, err)
	return out
}

// manyContainerWorker is a Dask worker of n containers.
func manyContainerWorker(t testing.TB, n int) []byte {
	t.Helper()
	cs := make([]map[string]any, n)
	for i := range cs {
		cs[i] = map[string]any{"name": fmt.Sprintf("c%d", i), "image": "ghcr.io/dask/dask:latest"}
	}
	out, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"generateName": "w-",
		"labels": map[string]any{"dask.org/component": "worker", "dask.org/cluster-name": "simple"}}, "spec": map[string]any{"containers": cs}})
	require.NoError(t, err)
	return out
}

// panicAll is a handler that panics on every request: a bug.
type panicAll struct{}

func (panicAll) Handle(context.Context, admission.Request) admission.Response {
	panic("a bug in the handler")
}

// panicOnObject is a Fallback that panics on any request with an object (a hostile object that
// the recogniser trips on) and hands the others on.
type panicOnObject struct{ fb Fallback }

func (p panicOnObject) Fallback(req admission.Request, reason Reason) admission.Response {
	if len(req.Object.Raw) > 0 {
		panic("a bug in the recogniser")
	}
	return p.fb.Fallback(req, reason)
}

// escapePath is one way a review can get past podpatch's handling.
type escapePath struct {
	name string
	// review is the review of the path in ns, with uid.
	review func(t *testing.T, uid types.UID, ns string) []byte
	// chunked: the body's length is not announced.
	chunked bool
	// handler is what Review serves with; nil: the Mutator.
	handler func(m *Mutator) admission.Handler
	// reason is the warning reason the unbound request is answered under.
	reason Reason
	// applies: where the enforce policy binds, podpatch may apply it (the bound is another
	// layer's) rather than deny.
	applies bool
}

// escapePaths are the paths, their sizes and counts generated from rng.
func escapePaths(t *testing.T, store *policystore.Store, rng *rand.Rand) []escapePath {
	overBound := maxSizePod(t, slots.MaxReviewSize+1+rng.IntN(1<<20))
	half := maxSizePod(t, slots.MaxReviewSize/2+1+rng.IntN(1<<20)) // two of them are over the bound
	overObject := maxSizePod(t, slots.MaxObjectSize+1+rng.IntN(1<<20))
	deep := strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) // beyond encoding/json's nesting
	old := func(ns string) []byte { return admittedWorker(t, store, ns) }
	ephemeral := func(n int) func(t *testing.T, uid types.UID, ns string) []byte {
		return func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Update, "ephemeralcontainers", withDebugContainers(t, old(ns), n), old(ns))
		}
	}
	generated := policies.MaxEphemeralAdded + 1 + rng.IntN(300)
	withMutator := func(h admission.Handler) func(*Mutator) admission.Handler {
		return func(m *Mutator) admission.Handler { return fallbackHandler{h, m} }
	}
	return []escapePath{
		{name: "body over the bound/create", reason: ReasonTooLarge, review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Create, "", overBound, nil)
		}},
		{name: "body over the bound/create, length not announced", reason: ReasonTooLarge, chunked: true, review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Create, "", overBound, nil)
		}},
		{name: "body over the bound/update", reason: ReasonTooLarge, review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Update, "", half, half)
		}},
		{name: "body over the bound/update, length not announced", reason: ReasonTooLarge, chunked: true, review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Update, "", half, half)
		}},
		{name: "object over its bound/create", reason: ReasonTooLarge, review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Create, "", overObject, nil)
		}},
		{name: "object over its bound/update's old object", reason: ReasonTooLarge, review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Update, "", old(ns), overObject)
		}},
		{name: "garbage after a head with a uid", reason: ReasonMalformedReview, review: func(t *testing.T, uid types.UID, ns string) []byte {
			full := podReview(t, uid, ns, admissionv1.Create, "", old(ns), nil)
			garbage := make([]byte, 64+rng.IntN(4096))
			for i := range garbage {
				garbage[i] = byte(rng.IntN(256))
			}
			return append(full[:bytes.Index(full, []byte(`"object"`))+len(`"object":{`)], garbage...)
		}},
		{name: "object nested beyond the decoder", reason: ReasonMalformedReview, review: func(t *testing.T, uid types.UID, ns string) []byte {
			full := podReview(t, uid, ns, admissionv1.Create, "", old(ns), nil)
			return bytes.Replace(full, []byte(`"spec":{`), []byte(`"spec":{"x":`+deep+`,`), 1)
		}},
		{name: "request without its kind", reason: ReasonMalformedReview, review: func(t *testing.T, uid types.UID, ns string) []byte {
			full := podReview(t, uid, ns, admissionv1.Create, "", old(ns), nil)
			return bytes.Replace(full, []byte(`"kind":{"group":"","version":"v1","kind":"Pod"}`), []byte(`"kind":{}`), 1)
		}},
		{name: "handler panics/create", reason: ReasonInternalError, handler: withMutator(panicAll{}), review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Create, "", []byte(workerPod), nil)
		}},
		{name: "handler panics/update that removes the manager's labels", reason: ReasonInternalError, handler: withMutator(panicAll{}),
			review: func(t *testing.T, uid types.UID, ns string) []byte {
				return podReview(t, uid, ns, admissionv1.Update, "", withoutLabels(t, old(ns)), old(ns))
			}},
		{name: "handler panics, and the fallback on the object", reason: ReasonInternalError,
			handler: func(m *Mutator) admission.Handler { return fallbackHandler{panicAll{}, panicOnObject{m}} },
			review: func(t *testing.T, uid types.UID, ns string) []byte {
				return podReview(t, uid, ns, admissionv1.Create, "", []byte(workerPod), nil)
			}},
		{name: "17 ephemeral containers", reason: ReasonApplyError, review: ephemeral(policies.MaxEphemeralAdded + 1)},
		{name: "200 ephemeral containers", reason: ReasonApplyError, review: ephemeral(200)},
		{name: fmt.Sprintf("%d ephemeral containers", generated), reason: ReasonApplyError, review: ephemeral(generated)},
		{name: "work beyond the engine's bound", reason: ReasonApplyError, applies: true, review: func(t *testing.T, uid types.UID, ns string) []byte {
			return podReview(t, uid, ns, admissionv1.Create, "", manyContainerWorker(t, 13_200), nil)
		}},
	}
}

// escapeBudget is TestNoEscapeThroughThePlumbing's request budget.
const escapeBudget = 5 * time.Minute

// TestNoEscapeThroughThePlumbing sends each escape path's review in team-a, where the
// platform's enforce policy selects the worker, and in team-b, where none does: the answer is
// always HTTP 200 with the request's uid; denied, naming the policy, in team-a (or, where the
// bound is another layer's, with the policy applied); allowed unchanged with a warning, counted
// under the path's reason, in team-b.
func TestNoEscapeThroughThePlumbing(t *testing.T) {
	// make test's seed (from the commit), so that a failure there reproduces; else a new one.
	seed := uint64(rand.Uint32())
	if s := os.Getenv("PODPATCH_PROPERTY_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "PODPATCH_PROPERTY_SEED")
	}
	t.Logf("seed %d (PODPATCH_PROPERTY_SEED=%d reruns it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	store := escapeStore(t)
	for _, path := range escapePaths(t, store, rng) {
		for _, ns := range []string{"team-a", "team-b"} {
			t.Run(path.name+"/"+ns, func(t *testing.T) {
				m := newTestMetrics(t)
				mutator := &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}
				var h admission.Handler = mutator
				if path.handler != nil {
					h = path.handler(mutator)
				}
				// A budget no path reaches on a loaded machine: the reason asserted is the path's
				// own (the 13,200 containers' is the engine's bound of work, not the clock's);
				// the budget's own answers are budget_test.go's.
				rv := &Review{Name: "mutate", Handler: h, Metrics: m, Slots: slots.New(slots.Options{MaxInFlight: DefaultMaxInFlight}),
					Budget: escapeBudget}
				uid := types.UID(fmt.Sprintf("%016x", rng.Uint64()))
				body := path.review(t, uid, ns)
				req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body))
				if path.chunked {
					req.ContentLength = -1
				}
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				rv.ServeHTTP(rec, req)

				require.Equal(t, http.StatusOK, rec.Code, "an HTTP error makes the API server apply failurePolicy Ignore: %.300s", rec.Body.String())
				var out admissionv1.AdmissionReview
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
				resp := out.Response
				require.NotNil(t, resp)
				require.Equal(t, uid, resp.UID, "the API server refuses an answer without the request's uid")
				if ns == "team-a" {
					requireBound(t, resp, path.applies)
					return
				}
				require.True(t, resp.Allowed, "no enforce policy binds it: %v", resp.Result)
				require.Empty(t, resp.Patch)
				require.NotEmpty(t, resp.Warnings, "admitted without the policies: the user is told")
				require.Equal(t, 1.0, testutil.ToFloat64(m.warnings.WithLabelValues(string(path.reason))))
			})
		}
	}
}

// requireBound checks the answer to a request the baseline binds: denied naming it, or (applies)
// admitted with it.
func requireBound(t *testing.T, resp *admissionv1.AdmissionResponse, applies bool) {
	t.Helper()
	if applies && resp.Allowed {
		require.NotEmpty(t, resp.Patch)
		p, err := jsonpatchOps(resp.Patch)
		require.NoError(t, err)
		require.Contains(t, p, "/metadata/labels/baseline", "admitted only with the enforce policy applied")
		return
	}
	require.False(t, resp.Allowed, "an enforce policy could bind it: applied or denied (reference §5)")
	require.Empty(t, resp.Patch)
	require.Contains(t, []int32{http.StatusForbidden, http.StatusTooManyRequests}, resp.Result.Code)
	require.Contains(t, resp.Result.Message, "podpatch-system/baseline/baseline", "the denial names the policy")
}

// jsonpatchOps lists the paths a JSONPatch writes.
func jsonpatchOps(patch []byte) ([]string, error) {
	var ops []struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	paths := make([]string, len(ops))
	for i, op := range ops {
		paths[i] = op.Path
	}
	return paths, nil
}

// TestEscapeDenialsSayWhy: the denial of each kind of unhandled request says what the user can
// act on, with the status a client acts on: 403 for what a retry does not change, 429 for the
// load.
func TestEscapeDenialsSayWhy(t *testing.T) {
	store := escapeStore(t)
	old := admittedWorker(t, store, "team-a")
	m := newTestMetrics(t)
	mutator := &Mutator{Source: store, Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}
	for _, c := range []struct {
		name    string
		handler admission.Handler
		body    []byte
		code    int32
		says    string
	}{
		{"one ephemeral container: the conflict itself", mutator,
			podReview(t, "u1", "team-a", admissionv1.Update, "ephemeralcontainers", withDebugContainers(t, old, 1), old),
			http.StatusForbidden, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"},
		{"16 ephemeral containers: each is checked", mutator,
			podReview(t, "u2", "team-a", admissionv1.Update, "ephemeralcontainers", withDebugContainers(t, old, policies.MaxEphemeralAdded), old),
			http.StatusForbidden, "`privileged` to true"},
		{"17 ephemeral containers: the bound", mutator,
			podReview(t, "u3", "team-a", admissionv1.Update, "ephemeralcontainers", withDebugContainers(t, old, policies.MaxEphemeralAdded+1), old),
			http.StatusForbidden, fmt.Sprintf("more than %d ephemeral containers in one update", policies.MaxEphemeralAdded)},
		{"a review over the bound", mutator,
			podReview(t, "u4", "team-a", admissionv1.Create, "", maxSizePod(t, slots.MaxReviewSize+1), nil),
			http.StatusForbidden, "larger than it handles"},
		{"a panic", fallbackHandler{panicAll{}, mutator},
			podReview(t, "u5", "team-a", admissionv1.Create, "", []byte(workerPod), nil),
			http.StatusForbidden, "internal error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, resp := post(t, &Review{Name: "mutate", Handler: c.handler, Metrics: m}, c.body, "application/json")
			require.Equal(t, http.StatusOK, rec.Code)
			require.NotNil(t, resp)
			require.False(t, resp.Allowed)
			require.Equal(t, c.code, resp.Result.Code)
			require.Contains(t, resp.Result.Message, c.says)
		})
	}
	require.Equal(t, 1.0, testutil.ToFloat64(m.panics.WithLabelValues("mutate")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.denials.WithLabelValues(ruleInternalError)))
}

// TestFallbackPanicsTwice: a Fallback that panics even without the request's objects leaves
// podpatch unable to tell whether an enforce policy binds the object: the request is denied,
// with its uid, never left to failurePolicy Ignore.
func TestFallbackPanicsTwice(t *testing.T) {
	m := newTestMetrics(t)
	h := &Review{Name: "mutate", Handler: fallbackHandler{panicAll{}, panicAlways{}}, Metrics: m}
	rec, resp := post(t, h, podReview(t, "u", "team-b", admissionv1.Create, "", []byte(workerPod), nil), "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	require.NotNil(t, resp)
	require.Equal(t, types.UID("u"), resp.UID)
	require.False(t, resp.Allowed)
	require.Equal(t, int32(http.StatusInternalServerError), resp.Result.Code)
	require.Equal(t, 3.0, testutil.ToFloat64(m.panics.WithLabelValues("mutate")), "the handler's, the fallback's on the object and without it")
}

type panicAlways struct{}

func (panicAlways) Fallback(admission.Request, Reason) admission.Response {
	panic("a bug in the fallback")
}

// TestHeadOnlyUpdateOfAStatus: a review over the bound of a subresource podpatch does not patch
// (pods/status: no field a policy sets) is allowed from its head, not denied: the head tells the
// subresource.
func TestHeadOnlyUpdateOfAStatus(t *testing.T) {
	store := escapeStore(t)
	big := maxSizePod(t, slots.MaxReviewSize/2+1)
	h := &Review{Name: "mutate", Handler: &Mutator{Source: store, Metrics: newTestMetrics(t), PlatformNamespace: policies.DefaultPlatformNamespace}}
	for _, c := range []struct {
		sub    string
		denied bool
	}{{"status", false}, {"", true}, {"resize", true}, {"ephemeralcontainers", true}} {
		rec, resp := post(t, h, podReview(t, "u", "team-a", admissionv1.Update, c.sub, big, big), "application/json")
		require.Equal(t, http.StatusOK, rec.Code, c.sub)
		require.NotNil(t, resp, c.sub)
		require.Equal(t, !c.denied, resp.Allowed, "subresource %q", c.sub)
	}
}

// TestNoEscapeOverTheWire sends an update over the bound — a Pod grown by ordinary updates —
// to the handler as `podpatch serve` wires it, over HTTPS, with Go's HTTP client as the API
// server uses it: podpatch answers from the head of the body without reading the rest, and the
// client gets the answer (HTTP 200, the uid, denied), not a broken connection.
func TestNoEscapeOverTheWire(t *testing.T) {
	store := escapeStore(t)
	h := NewHandler(HandlerOptions{Store: store, Policies: policies.DefaultOptions(), Metrics: newTestMetrics(t),
		RequestBudget: DefaultRequestBudget, MaxInFlight: DefaultMaxInFlight, LargeBodyBytes: slots.LargeBytesFor(manifestMemoryLimit), Log: logr.Discard()})
	srv := httptest.NewTLSServer(h)
	defer srv.Close()
	grown := maxSizePod(t, slots.MaxReviewSize/2+64<<10)
	for i, ns := range []string{"team-a", "team-b", "team-a"} {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		body := podReview(t, uid, ns, admissionv1.Update, "", withoutLabels(t, grown), grown)
		require.Greater(t, len(body), slots.MaxReviewSize)
		resp, err := srv.Client().Post(srv.URL+"/mutate", "application/json", bytes.NewReader(body))
		require.NoError(t, err, "the answer arrives although the body was not read")
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, "%.300s", raw)
		var out admissionv1.AdmissionReview
		require.NoError(t, json.Unmarshal(raw, &out))
		require.Equal(t, uid, out.Response.UID)
		require.Equal(t, ns == "team-b", out.Response.Allowed, "%v", out.Response.Result)
	}
	// A grown Pod's update within the bound is handled: the enforced label the update removed
	// is refused (the manager's labels with it: selection-changed).
	grown = maxSizePod(t, slots.MaxObjectSize-64<<10)
	res, err := store.Snapshot().Set.Apply(policies.Input{Kind: "Pod", Object: grown, Namespace: "team-a"})
	require.NoError(t, err)
	body := podReview(t, "uid-within", "team-a", admissionv1.Update, "", withoutLabels(t, res.Object), res.Object)
	require.Greater(t, len(body), slots.MaxObjectSize)
	require.LessOrEqual(t, len(body), slots.MaxReviewSize)
	resp, err := srv.Client().Post(srv.URL+"/mutate", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	var out admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, types.UID("uid-within"), out.Response.UID)
	require.False(t, out.Response.Allowed)
	require.NotContains(t, out.Response.Result.Message, "larger than it handles", "handled, not answered with the fallback")
}

// TestGrownPodUpdates is the attack that found this class, against the handler: a Pod grown by
// ordinary updates to 2.3 MB makes each later review some 4.7 MB (object and oldObject), once
// answered HTTP 413 — and with failurePolicy Ignore the API server stored the enforced label
// removed and a privileged debug container. Both are now handled: the label is put back, the
// debug container denied.
func TestGrownPodUpdates(t *testing.T) {
	store := escapeStore(t)
	res, err := store.Snapshot().Set.Apply(policies.Input{Kind: "Pod", Object: maxSizePod(t, 2_300_000), Namespace: "team-a"})
	require.NoError(t, err)
	grown := res.Object
	h := &Review{Name: "mutate", Handler: &Mutator{Source: store, Metrics: newTestMetrics(t), PlatformNamespace: policies.DefaultPlatformNamespace},
		Slots: slots.New(slots.Options{MaxInFlight: DefaultMaxInFlight}), Budget: DefaultRequestBudget}

	unlabelled := bytes.Replace(grown, []byte(`"baseline":"applied",`), nil, 1)
	require.NotEqual(t, grown, unlabelled)
	body := podReview(t, "u1", "team-a", admissionv1.Update, "", unlabelled, grown)
	require.Greater(t, len(body), 4_600_000)
	rec, resp := post(t, h, body, "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, types.UID("u1"), resp.UID)
	require.Contains(t, string(applyResponse(t, unlabelled, resp)), `"baseline":"applied"`, "the enforced label is put back")

	body = podReview(t, "u2", "team-a", admissionv1.Update, "ephemeralcontainers", withDebugContainers(t, grown, 1), grown)
	require.Greater(t, len(body), 4_600_000)
	rec, resp = post(t, h, body, "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, types.UID("u2"), resp.UID)
	require.False(t, resp.Allowed, "a privileged debug container breaks the enforced allowPrivilegeEscalation: false")
	require.Equal(t, int32(http.StatusForbidden), resp.Result.Code)
}
