package webhook

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestReviewHead finds the uid a fallback answer needs in the first bytes of a review.
func TestReviewHead(t *testing.T) {
	full := review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false)
	cases := []struct {
		name    string
		head    []byte
		version string
		uid     types.UID
	}{
		{"whole review", full, "admission.k8s.io/v1", "uid-Pod"},
		{"cut after the uid", full[:bytes.Index(full, []byte(`uid-Pod`))+10], "admission.k8s.io/v1", "uid-Pod"},
		{"cut inside the uid", full[:bytes.Index(full, []byte(`uid-Pod`))+3], "admission.k8s.io/v1", ""},
		{"v1beta1", []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u1"`), "admission.k8s.io/v1beta1", "u1"},
		{"uid before apiVersion", []byte(`{"request":{"kind":{"kind":"Pod"},"uid":"u2"},"apiVersion":"admission.k8s.io/v1"}`), "admission.k8s.io/v1", "u2"},
		{"uid after a cut object", []byte(`{"apiVersion":"admission.k8s.io/v1","request":{"object":{"a":[1,2`), "admission.k8s.io/v1", ""},
		{"uid of a nested object is not the request's", []byte(`{"apiVersion":"admission.k8s.io/v1","request":{"object":{"uid":"no"}}}`), "admission.k8s.io/v1", ""},
		{"not JSON", []byte(`<html>`), "", ""},
		{"not an object", []byte(`[{"request":{"uid":"x"}}]`), "", ""},
		{"empty", nil, "", ""},
	}
	// What a fallback reads to know whether enforce policies could bind the object.
	_, rh := reviewHead(full[:bytes.Index(full, []byte(`"object"`))])
	require.Equal(t, requestHead{UID: "uid-Pod", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "team-a", Operation: admissionv1.Create}, rh)
	_, rh = reviewHead(full[:bytes.Index(full, []byte(`"namespace"`))])
	require.Equal(t, "", rh.Namespace, "a head cut before the namespace has none")
	require.Equal(t, "Pod", rh.Kind.Kind)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm, rh := reviewHead(c.head)
			require.Equal(t, c.version, tm.APIVersion)
			require.Equal(t, c.uid, rh.UID)
		})
	}
}
