package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

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
