package versions

// Rule is a validation rule of the API server that holds from one version on (its feature gate
// turned on by default there): the other member of the class Fields belongs to. A policy's
// fields are checked once, for every supported version (internal/k8sfields): a
// stricter rule holds if any supported version applies it, a relaxed one only if every
// supported version does, so that what lint accepts is accepted by each.
type Rule struct {
	// Gate is the feature gate that decides it.
	Gate string
	// From is the first minor whose default gates apply it.
	From int
	// What the rule is, for a person.
	What string
}

// HoldsAt reports whether Kubernetes v applies the rule by default.
func (r Rule) HoldsAt(v Version) bool { return v.Minor >= r.From }

// HoldsOnEvery reports whether every supported version applies it.
func (r Rule) HoldsOnEvery() bool { return r.From <= OldestMinor }

// HoldsOnAny reports whether some supported version applies it.
func (r Rule) HoldsOnAny() bool { return r.From <= NewestMinor }

// The rules that differ by version, as measured (TestValidationOracle in each lane of the
// matrix; the sources' versioned feature gates agree).
var (
	// StrictIPs: IPs with leading zeros and CIDRs with bits beyond the prefix are refused
	// (Service loadBalancerSourceRanges and externalIPs, Pod hostAliases and DNS nameservers);
	// older versions accept them. Stricter: k8sfields applies it on every version.
	StrictIPs = Rule{Gate: "StrictIPCIDRValidation", From: 36,
		What: "IPs without leading zeros, CIDRs without bits set beyond the prefix length"}
	// RelaxedEnvNames: environment variable names and envFrom prefixes may be any printable
	// ASCII but '='; older versions require a C identifier-like name. Relaxed: k8sfields
	// accepts them only while every supported version does.
	RelaxedEnvNames = Rule{Gate: "RelaxedEnvironmentVariableValidation", From: 32,
		What: "environment variable names of any printable ASCII characters but '='"}
	// MergedMatchLabelKeys: a topology spread constraint's matchLabelKeys are merged into its
	// labelSelector, so a key twice, or one the selector already has, is refused; 1.33 accepts
	// them. Stricter: validity applies it on every version.
	MergedMatchLabelKeys = Rule{Gate: "MatchLabelKeysInPodTopologySpreadSelectorMerge", From: 34,
		What: "topology spread matchLabelKeys merged into the labelSelector: no key twice"}
)

// Rules are the rules that differ by version, for the tests and the docs.
var Rules = []Rule{StrictIPs, RelaxedEnvNames, MergedMatchLabelKeys}
