package webhook

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/webhook/slots"
)

// TestFloodingNamespaceQueuesBehindItself: one namespace's reviews hold every handling slot
// and many more wait; a review of another namespace, sent after them all, is handled with the
// next slot freed and patched, while the flood's waiting reviews still wait (reference §5).
func TestFloodingNamespaceQueuesBehindItself(t *testing.T) {
	const handling, queued = 2, 20
	m := newTestMetrics(t)
	mutator := &Mutator{Source: teamStore(t), Metrics: m}
	release := make(chan struct{})
	var bounds *slots.Slots
	waitingAtOther := -1 // the flood's reviews waiting when the other namespace's is handled
	blocking := admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		if req.Namespace == "flood" {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return admission.Allowed("")
		}
		waitingAtOther = bounds.Waiting()
		return mutator.Handle(ctx, req)
	})
	bounds = slots.New(slots.Options{MaxInFlight: handling})
	h := &Review{Name: "mutate", Handler: blocking, Slots: bounds, Metrics: m, Budget: 5 * time.Second}
	send := func(ns string) *admissionv1.AdmissionResponse {
		rec := serveMutate(h, review(t, "Pod", ns, admissionv1.Create, []byte(workerPod), false))
		var out admissionv1.AdmissionReview
		if json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			return nil
		}
		return out.Response
	}
	var flood sync.WaitGroup
	for i := range handling + queued {
		flood.Go(func() { send("flood") })
		if i >= handling { // in a known order: each flood review waits before the next is sent
			require.Eventually(t, func() bool { return bounds.Waiting() == i-handling+1 }, 5*time.Second, time.Millisecond)
		}
	}
	other := make(chan *admissionv1.AdmissionResponse, 1)
	go func() { other <- send("team-a") }()
	require.Eventually(t, func() bool { return bounds.Waiting() == queued+1 }, 5*time.Second, time.Millisecond)

	release <- struct{}{} // one flood review done: one slot free
	resp := <-other
	require.NotNil(t, resp)
	require.Empty(t, resp.Warnings, "no fallback")
	require.Contains(t, string(applyResponse(t, []byte(workerPod), resp)), `"team":"a"`, "the other namespace's review is patched")
	require.Equal(t, queued, waitingAtOther, "the flood's reviews still wait: the freed slot went to the other namespace")

	close(release)
	flood.Wait()
	require.Zero(t, bounds.Waiting())
}
