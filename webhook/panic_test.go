package webhook

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/policies"
)

// panicking panics on every request whose namespace is "boom" and hands the others on.
type panicking struct{ next admission.Handler }

func (p panicking) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Namespace == "boom" {
		panic("a bug in a handler")
	}
	return p.next.Handle(ctx, req)
}

// A handler's panic is answered with an error for that request alone, counted by webhook in
// podpatch_panics_total, and the handler keeps serving.
func TestPanicRecoveredAndCounted(t *testing.T) {
	m := newTestMetrics(t)
	mutator := &Mutator{Source: teamStore(t), Metrics: m, PlatformNamespace: policies.DefaultPlatformNamespace}
	for _, name := range []string{"mutate", "validate"} {
		h := &Review{Name: name, Handler: panicking{mutator}, Metrics: m}
		for i := range 2 {
			body := review(t, "Pod", "boom", admissionv1.Create, []byte(workerPod), false)
			rec, resp := post(t, h, body, "application/json")
			require.Equal(t, http.StatusOK, rec.Code)
			require.NotNil(t, resp)
			require.False(t, resp.Allowed)
			require.Equal(t, int32(http.StatusInternalServerError), resp.Result.Code)
			require.Equal(t, types.UID("uid-Pod"), resp.UID, "the API server rejects an answer without the request's uid")
			require.Equal(t, float64(i+1), testutil.ToFloat64(m.panics.WithLabelValues(name)), name)
		}
		rec, resp := post(t, h, review(t, "Pod", "team-a", admissionv1.Create, []byte(workerPod), false), "application/json")
		require.Equal(t, http.StatusOK, rec.Code)
		require.True(t, resp.Allowed, "the next request is served")
		require.Equal(t, 2.0, testutil.ToFloat64(m.panics.WithLabelValues(name)), "not counted again")
	}
	require.Equal(t, 2, testutil.CollectAndCount(m.panics), "one series per webhook")
}
