package webhook

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/webhook/slots"
)

// The defaults of the request budget and the handling slots, for `podpatch serve`'s flags and
// the benchmarks.
const (
	// DefaultRequestBudget is below the webhooks' timeoutSeconds (2) with room for the network.
	DefaultRequestBudget = 1500 * time.Millisecond
	// DefaultMaxInFlight is the number of requests handled at once, their bodies read. Memory
	// is bounded by the room reserved for bodies (slots.Slots, slots.LargeBytesFor), not by
	// this count: ordinary Pods are admitted in well under a millisecond, so 4 slots are
	// rarely all busy, and the large reviews that take long are few at once by their room.
	DefaultMaxInFlight = 4
)

// The stages at which a request can run out of budget: the stage label of
// podpatch_budget_exceeded_total.
const (
	stageWait   = "wait"   // waiting for a slot
	stageRead   = "read"   // reading the body
	stageHandle = "handle" // the handler
)

// Fallback is implemented by handlers that have an answer for a request they did not handle
// (reason): the server was overloaded, the budget ran out, the review or its object was too
// large or did not decode, the handler panicked. The request may carry no object (only the
// head of its body was read, or its object was too large): the answer is then made from its
// kind, subresource, namespace and operation. Review answers with it every such request that
// has a uid, so that it is an admission response: an HTTP error would make the API server apply
// the webhook's failurePolicy (reference §5). A handler without one gets an HTTP error there.
type Fallback interface {
	Fallback(req admission.Request, reason Reason) admission.Response
}

// bodyReadTime is how long a body of n bytes may take to arrive once its room is reserved,
// for a request budget of budget: the API server sends a review at once, from memory, over the
// cluster network, so a client slower than this is not the API server, and holds its room no
// longer. A sixth of the budget (250 ms of the default 1.5 s), plus a second per 8 MiB: 750 ms
// for the largest body, by default.
func bodyReadTime(budget time.Duration, n int64) time.Duration {
	if n < 0 {
		n = slots.MaxReviewSize
	}
	base := budget / 6
	if budget <= 0 {
		base = DefaultRequestBudget / 6
	}
	return base + time.Duration(n)*time.Second/bodyReadRate
}

// bodyReadRate is the slowest rate, in bytes per second, at which a body may arrive.
const bodyReadRate = 8 << 20
