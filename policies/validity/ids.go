package validity

import "slices"

// Every id a policy can be left out for, or an object denied for, in one place: the rules of
// the object (what the API server refuses) and the reasons that are no rule of the object's
// (the engine's own bounds, the Kubernetes version, what an update may not change). They are
// the values of podpatch_policy_skipped_total's and podpatch_enforce_denials_total's reason
// label; docs/metrics.md and docs/validity.md list each (test/docs holds them to this file).

// The rules: what the API server's validation and its admission plugins refuse in a patched
// object (reference §8).
const (
	RuleDuplicateContainer      = "duplicate-container-name"
	RuleDuplicatePortName       = "duplicate-port-name"
	RuleDuplicateHostPort       = "duplicate-host-port"
	RuleDuplicateVolume         = "duplicate-volume-name"
	RuleMountWithoutVolume      = "volume-mount-without-volume"
	RuleDuplicateMountPath      = "duplicate-mount-path"
	RuleMountSubPath            = "volume-mount-subpath"
	RuleRequestAboveLimit       = "request-above-limit"
	RuleExtendedResourceLimit   = "extended-resource-limit"
	RulePriorityClassNotFound   = "priority-class-not-found"
	RulePriorityMismatch        = "priority-mismatch"
	RuleRuntimeClassNotFound    = "runtime-class-not-found"
	RuleOverheadMismatch        = "overhead-mismatch"
	RuleRuntimeClassScheduling  = "runtime-class-node-selector-conflict"
	RuleServiceAccountNotFound  = "service-account-not-found"
	RuleLimitRange              = "limit-range"
	RulePodSecurity             = "pod-security"
	RuleAnnotationsTooLong      = "annotations-too-long"
	RuleServiceHeadlessExternal = "service-headless-external"
	RuleServiceTypeField        = "service-type-field"
	RuleServicePortName         = "service-port-name"
	RuleServiceDuplicatePort    = "service-duplicate-port"
	RuleServicePortsRequired    = "service-ports-required"
	RuleServiceExternalName     = "service-external-name"
	RulePodResources            = "pod-resources"
	RuleEnvSource               = "env-source"
	RuleResourceClaimNotFound   = "resource-claim-not-found"
	RuleVolumeSource            = "volume-source"
	RuleServiceClusterIPs       = "service-cluster-ips"
	RuleResourceClaimSource     = "resource-claim-source"
	RuleRestartPolicyRules      = "restart-policy-rules"
	RulePodOS                   = "pod-os"
	RulePodFieldConflict        = "pod-field-conflict"
	// RuleServiceIPFamilies: a Service's IP families must be ones the cluster serves. The API
	// server's Service storage (initIPFamilyFields in pkg/registry/core/service/storage)
	// refuses a family it has no cluster IP allocator for, dual stack demanded of a
	// single-stack cluster, and two families or cluster IPs under a SingleStack policy (what a
	// missing policy means on create). Its allocators are those of
	// --service-cluster-ip-range, which the default ServiceCIDR "kubernetes" mirrors;
	// Cluster.ServiceIPFamilies reads it.
	RuleServiceIPFamilies = "service-ip-families"
)

// The reasons of a policy left out that are no rule of the object's: the engine's own bounds
// (reference §3, Limits; §5, the request budget), the cluster's version, the namespace route.
// An enforce policy left out for one of them denies the object as a rule's violation does.
const (
	// ReasonBudget: the request budget ran out before podpatch could apply the policy or check
	// that it keeps the object valid.
	ReasonBudget = "budget"
	// ReasonWork: the object is beyond what podpatch patches (the values one admission may
	// write, the size of the patched object).
	ReasonWork = "work"
	// ReasonSelection: the labels the policies set keep changing which of them match, or a
	// namespace policy's labels would switch a platform enforce policy off.
	ReasonSelection = "selection-diverges"
	// ReasonKubeVersion: the cluster's Kubernetes version refuses a field the policy sets (its
	// feature gate is off there; policies/versions).
	ReasonKubeVersion = "kube-version"
	// ReasonKueueMark: a namespace policy sets one of Kueue's marks on a Pod that came without
	// one, which would hand the placement the platform's enforce policies set to Kueue
	// (reference §5: a namespace policy never leaves an enforce policy out).
	ReasonKueueMark = "kueue-mark"
)

// The reasons of an update denied for what it changes on an object holding enforce policies
// (policies.Set.PatchUpdate): podpatch_enforce_denials_total's reasons.
const (
	// ReasonSelectionChanged: the update changes the labels that select the object for an
	// enforce policy it held.
	ReasonSelectionChanged = "selection-changed"
	// ReasonIdentityChanged: the update changes what the object is to podpatch: its
	// recognition, manager, role, cluster or group, or the container "@main" names. The
	// policies it holds, and the container they size, were decided on that identity: a Dask
	// worker relabelled as a Ray worker would move "@main" to its first container and let the
	// real worker be resized past the enforced limit.
	ReasonIdentityChanged = "identity-changed"
	// ReasonRecognitionLabel: the update removes or changes a label the object's manager is
	// recognised by (its role, required, cluster and group labels, and the labels its Services
	// carry): the webhooks' objectSelectors read those labels, and without them no later write
	// of the object reaches podpatch — a Service still recognised by its selector included.
	ReasonRecognitionLabel = "recognition-label-changed"
	// ReasonOverridesEnforced: an added ephemeral container overrides, with its own
	// securityContext, a Pod-level field an enforce policy sets (runAsNonRoot, seccompProfile,
	// …): it would run without the policy's effect.
	ReasonOverridesEnforced = "overrides-enforced"
)

// Rules lists every rule id.
var Rules = []string{
	RuleDuplicateContainer, RuleDuplicatePortName, RuleDuplicateHostPort, RuleDuplicateVolume,
	RuleMountWithoutVolume, RuleDuplicateMountPath, RuleMountSubPath, RuleRequestAboveLimit,
	RuleExtendedResourceLimit, RulePriorityClassNotFound, RulePriorityMismatch, RuleRuntimeClassNotFound,
	RuleOverheadMismatch, RuleRuntimeClassScheduling, RuleServiceAccountNotFound, RuleLimitRange,
	RulePodSecurity, RuleAnnotationsTooLong, RuleServiceHeadlessExternal, RuleServiceTypeField,
	RuleServicePortName, RuleServiceDuplicatePort, RuleServicePortsRequired, RuleServiceExternalName,
	RulePodResources, RuleResourceClaimNotFound, RuleVolumeSource, RuleServiceClusterIPs, RulePodOS,
	RulePodFieldConflict, RuleEnvSource, RuleResourceClaimSource, RuleRestartPolicyRules,
	RuleServiceIPFamilies,
}

// Reasons lists every reason a policy is left out for that is no rule.
var Reasons = []string{ReasonBudget, ReasonWork, ReasonSelection, ReasonKubeVersion, ReasonKueueMark}

// UpdateReasons lists every reason an update is denied for what it changes.
var UpdateReasons = []string{ReasonSelectionChanged, ReasonIdentityChanged, ReasonRecognitionLabel, ReasonOverridesEnforced}

// LeftOutFor reports whether id is a rule or a reason a policy is left out for: a fixed set,
// the skipped metric's reason label.
func LeftOutFor(id string) bool { return slices.Contains(Rules, id) || slices.Contains(Reasons, id) }
