package webhook

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
	// ReasonFieldWithoutEffect: a policy sets a field the cluster's Kubernetes version drops
	// (reference §8, policies/versions); podpatch_fields_without_effect_total counts each by gate.
	ReasonFieldWithoutEffect Reason = "field_without_effect"
	// ReasonCheckFinding: a manager-aware check found that a policy contradicts the manager
	// (reference §8); podpatch_check_findings_total counts each by check.
	ReasonCheckFinding Reason = "check_finding"
	// ReasonEnforceRestored: an update (or an added ephemeral container) undid what platform
	// enforce policies set; podpatch put it back (reference §5, "Enforce on updates").
	ReasonEnforceRestored Reason = "enforce_restored"
	// ReasonEnforceNotHeld: an updated object did not hold some of the platform's enforce
	// policies before the update (added since, or the object admitted while podpatch was
	// down); those were not applied to it, and the audit reports the object.
	ReasonEnforceNotHeld Reason = "enforce_not_held"
)
