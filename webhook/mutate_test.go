package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/allowlist"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/webhook/policystore"
)

const goldenRoot = "../policies/testdata/apply"

// caseArgs mirrors the optional args.yaml of a golden case.
type caseArgs struct {
	Namespace              string            `json:"namespace"`
	NamespaceLabels        map[string]string `json:"namespaceLabels"`
	PlatformNamespace      string            `json:"platformNamespace"`
	NamespaceAllowedFields []string          `json:"namespaceAllowedFields"`
}

// staticSource serves one fixed snapshot.
type staticSource struct {
	snap   *policystore.Snapshot
	labels map[string]string
}

func (s staticSource) Snapshot() *policystore.Snapshot          { return s.snap }
func (s staticSource) NamespaceLabels(string) map[string]string { return s.labels }

func newTestMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return m
}

func newStoreMetrics(t testing.TB) *policystore.Metrics {
	t.Helper()
	m, err := policystore.NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	return m
}

// review builds an AdmissionReview request body.
func review(t testing.TB, kind, namespace string, op admissionv1.Operation, obj []byte, dryRun bool) []byte {
	t.Helper()
	group := "" // Pods, Services and ConfigMaps are all in the core group
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("uid-" + kind),
			Kind:      metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind},
			Resource:  metav1.GroupVersionResource{Group: group, Version: "v1", Resource: strings.ToLower(kind) + "s"},
			Namespace: namespace,
			Operation: op,
			Object:    runtime.RawExtension{Raw: obj},
			DryRun:    &dryRun,
		},
	}
	b, err := json.Marshal(ar)
	require.NoError(t, err)
	return b
}

// post sends a body to a handler and decodes the AdmissionReview response.
func post(t *testing.T, h http.Handler, body []byte, contentType string) (*httptest.ResponseRecorder, *admissionv1.AdmissionResponse) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		return rec, nil
	}
	return rec, out.Response
}

// serveMutate posts an AdmissionReview body to a handler's /mutate, as the API server does, and
// returns the recorded answer.
func serveMutate(h http.Handler, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mutate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// applyResponse applies the response's JSONPatch (if any) to the object.
func applyResponse(t *testing.T, obj []byte, resp *admissionv1.AdmissionResponse) []byte {
	t.Helper()
	require.True(t, resp.Allowed, "podpatch never denies a Pod or Service: %v", resp.Result)
	if len(resp.Patch) == 0 {
		return obj
	}
	require.Equal(t, admissionv1.PatchTypeJSONPatch, *resp.PatchType)
	p, err := jsonpatch.DecodePatch(resp.Patch)
	require.NoError(t, err)
	out, err := p.Apply(obj)
	require.NoError(t, err)
	return out
}

// TestMutateGolden sends every Pod and Service of every engine golden case through the HTTP
// handler as an AdmissionReview, applies the returned JSONPatch to the input, and compares the
// result with the case's want.yaml: the webhook produces exactly what `podpatch render` prints.
func TestMutateGolden(t *testing.T) {
	entries, err := os.ReadDir(goldenRoot)
	require.NoError(t, err)
	require.NotEmpty(t, entries)
	checked := 0
	for _, e := range entries {
		dir := filepath.Join(goldenRoot, e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			var args caseArgs
			if b, err := os.ReadFile(filepath.Join(dir, "args.yaml")); err == nil {
				require.NoError(t, yaml.UnmarshalStrict(b, &args))
			}
			if args.Namespace == "" {
				args.Namespace = "default"
			}
			opts := policies.DefaultOptions()
			if args.PlatformNamespace != "" {
				opts.PlatformNamespace = args.PlatformNamespace
			}
			if args.NamespaceAllowedFields != nil {
				opts.NamespaceAllowed, err = allowlist.ParseFields(args.NamespaceAllowedFields)
				require.NoError(t, err)
			}
			cms, err := policyfiles.ReadConfigMaps([]string{filepath.Join(dir, "policies.yaml")}, args.Namespace, nil)
			require.NoError(t, err)
			set, probs := policies.Compile(cms, opts)
			require.Empty(t, probs)
			h := &Review{Handler: &Mutator{
				Source:            staticSource{snap: &policystore.Snapshot{Set: set}, labels: args.NamespaceLabels},
				Metrics:           newTestMetrics(t),
				PlatformNamespace: opts.PlatformNamespace,
			}}

			in := readDocs(t, filepath.Join(dir, "in.yaml"))
			want := readDocs(t, filepath.Join(dir, "want.yaml"))
			in, want = flattenLists(t, in), flattenLists(t, want)
			require.Len(t, want, len(in), "want.yaml must have one document per input object")
			for i, doc := range in {
				var head struct {
					Kind     string `json:"kind"`
					Metadata struct {
						Namespace string `json:"namespace"`
					} `json:"metadata"`
				}
				require.NoError(t, json.Unmarshal(doc, &head))
				if head.Kind != "Pod" && head.Kind != "Service" {
					continue
				}
				ns := head.Metadata.Namespace
				if ns == "" {
					ns = args.Namespace
				}
				_, resp := post(t, h, review(t, head.Kind, ns, admissionv1.Create, doc, false), "application/json")
				require.NotNil(t, resp)
				got := applyResponse(t, doc, resp)
				require.JSONEq(t, string(want[i]), string(got), "object %d", i+1)
				checked++
			}
		})
	}
	require.Positive(t, checked)
}

// readDocs reads a YAML stream as JSON documents.
func readDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	docs, err := policies.SplitDocuments(bytes.NewReader(b))
	require.NoError(t, err)
	out := make([][]byte, len(docs))
	for i, d := range docs {
		out[i] = d.JSON
	}
	return out
}

// flattenLists replaces each List by its items, as render prints them.
func flattenLists(t *testing.T, docs [][]byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, d := range docs {
		var list struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		require.NoError(t, json.Unmarshal(d, &list))
		if !strings.HasSuffix(list.Kind, "List") || list.Items == nil {
			out = append(out, d)
			continue
		}
		for _, it := range list.Items {
			out = append(out, []byte(it))
		}
	}
	return out
}
