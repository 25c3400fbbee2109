package policies

import "github.com/podpatch/podpatch/policies/validity"

// The names below are package validity's, kept under their old names in policies for the
// transition of issue 32's first step: code outside policies/ (webhook, internal/references,
// audit, explain, preview, cmd/podpatch, test/...) still says policies.Cluster,
// policies.Violation, policies.RuleRequestAboveLimit. They go once those callers name validity's.

// Cluster is validity.Cluster: the admission plugins' lookups, answered from caches.
type Cluster = validity.Cluster

// Presence is validity.Presence.
type Presence = validity.Presence

// PriorityClassInfo is validity.PriorityClassInfo.
type PriorityClassInfo = validity.PriorityClassInfo

// RuntimeClassInfo is validity.RuntimeClassInfo.
type RuntimeClassInfo = validity.RuntimeClassInfo

// Violation is validity.Violation: one reason the API server would refuse an object.
type Violation = validity.Violation

// The answers of a Cluster: validity's.
const (
	Unknown = validity.Unknown
	Absent  = validity.Absent
	Present = validity.Present
)

// MaxViolations is validity.MaxViolations.
const MaxViolations = validity.MaxViolations

// PodSecurityEnforceLabel is validity.PodSecurityEnforceLabel.
const PodSecurityEnforceLabel = validity.PodSecurityEnforceLabel

// Rules is validity.Rules: every rule id.
var Rules = validity.Rules

// The rule ids: validity's.
const (
	RulePodOS                   = validity.RulePodOS
	RulePodFieldConflict        = validity.RulePodFieldConflict
	RuleDuplicateContainer      = validity.RuleDuplicateContainer
	RuleDuplicatePortName       = validity.RuleDuplicatePortName
	RuleDuplicateHostPort       = validity.RuleDuplicateHostPort
	RuleDuplicateVolume         = validity.RuleDuplicateVolume
	RuleMountWithoutVolume      = validity.RuleMountWithoutVolume
	RuleDuplicateMountPath      = validity.RuleDuplicateMountPath
	RuleMountSubPath            = validity.RuleMountSubPath
	RuleRequestAboveLimit       = validity.RuleRequestAboveLimit
	RuleExtendedResourceLimit   = validity.RuleExtendedResourceLimit
	RulePriorityClassNotFound   = validity.RulePriorityClassNotFound
	RulePriorityMismatch        = validity.RulePriorityMismatch
	RuleRuntimeClassNotFound    = validity.RuleRuntimeClassNotFound
	RuleOverheadMismatch        = validity.RuleOverheadMismatch
	RuleRuntimeClassScheduling  = validity.RuleRuntimeClassScheduling
	RuleServiceAccountNotFound  = validity.RuleServiceAccountNotFound
	RuleLimitRange              = validity.RuleLimitRange
	RulePodSecurity             = validity.RulePodSecurity
	RuleAnnotationsTooLong      = validity.RuleAnnotationsTooLong
	RuleServiceHeadlessExternal = validity.RuleServiceHeadlessExternal
	RuleServiceTypeField        = validity.RuleServiceTypeField
	RuleServicePortName         = validity.RuleServicePortName
	RuleServiceDuplicatePort    = validity.RuleServiceDuplicatePort
	RuleServicePortsRequired    = validity.RuleServicePortsRequired
	RuleServiceExternalName     = validity.RuleServiceExternalName
	RulePodResources            = validity.RulePodResources
	RuleEnvSource               = validity.RuleEnvSource
	RuleResourceClaimNotFound   = validity.RuleResourceClaimNotFound
	RuleVolumeSource            = validity.RuleVolumeSource
	RuleServiceClusterIPs       = validity.RuleServiceClusterIPs
	RuleResourceClaimSource     = validity.RuleResourceClaimSource
	RuleRestartPolicyRules      = validity.RuleRestartPolicyRules
	RuleServiceIPFamilies       = validity.RuleServiceIPFamilies
	RuleBudget                  = validity.RuleBudget
)
