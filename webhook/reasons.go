package webhook

import (
	"fmt"

	"github.com/podpatch/podpatch/policies/validity"
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
	// ReasonApplyError: the object could not be patched (beyond a bound of the engine, such as
	// more than policies.MaxEphemeralAdded ephemeral containers added at once): denied when
	// platform enforce policies could bind it, else allowed unchanged (reference §5).
	ReasonApplyError Reason = "apply_error"
	// ReasonTooLarge: the review is larger than slots.MaxReviewSize, or one of its objects larger
	// than slots.MaxObjectSize; it was answered from its head, unhandled.
	ReasonTooLarge Reason = "too_large"
	// ReasonMalformedReview: the review carries a uid but could not be decoded.
	ReasonMalformedReview Reason = "malformed_review"
	// ReasonInternalError: the handler panicked on the request (a bug).
	ReasonInternalError Reason = "internal_error"
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
	// ReasonFieldWithoutEffect: a policy sets a field the cluster's Kubernetes version drops
	// (reference §8, policies/versions); podpatch_fields_without_effect_total counts each by gate.
	ReasonFieldWithoutEffect Reason = "field_without_effect"
	// ReasonCheckFinding: a manager-aware check found that a policy contradicts the manager
	// (reference §8); podpatch_check_findings_total counts each by check.
	ReasonCheckFinding Reason = "check_finding"
	// ReasonEnforceRestored: an update (or an added ephemeral container) undid what platform
	// enforce policies set; podpatch put it back (reference §5, "Enforce on updates").
	ReasonEnforceRestored Reason = "enforce_restored"
	// ReasonEnforceNotHeld: an updated object did not hold, as stored, some of the platform's
	// enforce policies that select it (policies.Set.Holding: a field the policy sets is missing
	// or has another value, a creator's field in an element the policy brings whole, a
	// container's own security field overriding the policy's Pod-level one), or only the
	// update's labels select them; the warning says where. Those whose fields were not all
	// there were not applied to the update, and the audit reports the object.
	ReasonEnforceNotHeld Reason = "enforce_not_held"
)

// ruleInternalError is the rule a fallback denial names when podpatch failed on the request
// (podpatch_enforce_denials_total's reason): a bug, not the object's.
const ruleInternalError = "internal-error"

// fallback says, for an answer to a request not handled for r, why podpatch did not apply the
// policies (to end "… because"), and the rule a denial names: validity.ReasonBudget when only
// the budget or the load stood in the way (429: the client retries), validity.ReasonWork when the
// request is beyond what podpatch handles and ruleInternalError when podpatch failed on it
// (403: a retry changes nothing).
func (r Reason) fallback() (why, rule string) {
	switch r {
	case ReasonOverloaded:
		return "it was overloaded", validity.ReasonBudget
	case ReasonTooLarge:
		return fmt.Sprintf("the object is larger than it handles (%d bytes of JSON, %d for an update's two objects with the review)",
			slots.MaxObjectSize, slots.MaxReviewSize), validity.ReasonWork
	case ReasonMalformedReview:
		return "the admission review could not be decoded", validity.ReasonWork
	case ReasonApplyError:
		return "the object could not be patched", validity.ReasonWork
	case ReasonInternalError:
		return "it failed on the request (an internal error, logged as \"admission handler panicked\")", ruleInternalError
	default:
		return "its request budget ran out", validity.ReasonBudget
	}
}
