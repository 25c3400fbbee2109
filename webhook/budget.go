package webhook

import (
	"bytes"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/podpatch/podpatch/webhook/slots"
)

// Reason says why a request was answered without being handled; it is the reason label of
// podpatch_admission_warnings_total.
type Reason string

const (
	// ReasonBudgetExceeded: the request budget ran out, or the API server gave up, before the
	// request was handled.
	ReasonBudgetExceeded Reason = "budget_exceeded"
	// ReasonOverloaded: there was no room for the request's body, or no handling slot, for its
	// whole budget.
	ReasonOverloaded Reason = "overloaded"
	// ReasonInvalidPolicy: a policy ConfigMap that could apply fails to compile; its last good
	// version was applied.
	ReasonInvalidPolicy Reason = "invalid_policy"
	// ReasonApplyError: the object could not be patched and was allowed unchanged.
	ReasonApplyError Reason = "apply_error"
	// ReasonNamespacePoliciesLeftOut: namespace policies made the object unpatchable, so the
	// platform's were applied alone.
	ReasonNamespacePoliciesLeftOut Reason = "namespace_policies_left_out"
	// ReasonSelectionDiverges: the platform's selectors contradict each other (the labels its
	// policies set keep changing which of them match), so only its enforce policies applied.
	ReasonSelectionDiverges Reason = "selection_diverges"
	// ReasonNamespaceLimit: the namespace holds more than MaxNamespacePolicies policies; the
	// ConfigMaps past it are left out.
	ReasonNamespaceLimit Reason = "namespace_limit"
	// ReasonNamespaceMismatch: the object's metadata.namespace is not the request's namespace;
	// it was allowed unchanged (reference §5: only the request's namespace selects policies).
	ReasonNamespaceMismatch Reason = "namespace_mismatch"
	// ReasonPolicySkipped: a policy was left out because it would have made the object invalid
	// (reference §8); podpatch_policy_skipped_total counts each by rule.
	ReasonPolicySkipped Reason = "policy_skipped"
	// ReasonCheckFinding: a manager-aware check found that a policy contradicts the manager
	// (reference §8); podpatch_check_findings_total counts each by check.
	ReasonCheckFinding Reason = "check_finding"
)

// The stages at which a request can run out of budget: the stage label of
// podpatch_budget_exceeded_total.
const (
	stageWait   = "wait"   // waiting for a slot
	stageRead   = "read"   // reading the body
	stageHandle = "handle" // the handler
)

// Fallback is implemented by handlers that have an answer for a request they did not handle:
// the server was overloaded or the budget ran out. A handler without one gets an HTTP 503, and
// the API server applies the webhook's failurePolicy.
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

// maxHeadSize bounds what is read of a request that will not be handled, to find the uid its
// answer must carry. kube-apiserver writes apiVersion, kind and then request.uid first
// (admission.k8s.io/v1 field order), so the uid is within the first hundred bytes; the rest of
// the head allows for clients that order fields differently.
const maxHeadSize = 4 << 10

// reviewHead finds the apiVersion, kind and request.uid at the start of an AdmissionReview
// without decoding (or holding) the rest: the head may be cut anywhere. The uid is empty when
// it is not in the head.
func reviewHead(head []byte) (metav1.TypeMeta, types.UID) {
	var tm metav1.TypeMeta
	var uid types.UID
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return tm, ""
	}
	str := func(dst *string) bool { return dec.Decode(dst) == nil }
	skip := func() bool {
		var v json.RawMessage
		return dec.Decode(&v) == nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return tm, uid
		}
		switch k {
		case "apiVersion":
			if !str(&tm.APIVersion) {
				return tm, uid
			}
		case "kind":
			if !str(&tm.Kind) {
				return tm, uid
			}
		case "request":
			if t, err := dec.Token(); err != nil || t != json.Delim('{') {
				return tm, uid
			}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return tm, uid
				}
				if k != "uid" {
					if !skip() {
						return tm, uid
					}
					continue
				}
				var s string
				if !str(&s) {
					return tm, uid
				}
				uid = types.UID(s)
				if tm.APIVersion != "" {
					return tm, uid
				}
			}
			if _, err := dec.Token(); err != nil { // the request's closing brace
				return tm, uid
			}
		default:
			if !skip() {
				return tm, uid
			}
		}
	}
	return tm, uid
}
