package property

import "regexp"

// family is a root cause: the refusal classes (messages) it covers, and what podpatch should do
// about it. Families are the classes of refusal found before podpatch checked validity
// (docs/validity.md) and those of regressions_test.go.
type family struct {
	name string
	re   *regexp.Regexp
}

// families group the classes of refusals by root cause, first match wins; a class matching
// none is reported as "unclassified" (a new kind of refusal: add a family and a regression).
var families = []family{
	{"priority-computed-by-admission", regexp.MustCompile(`must not be provided in pod spec; priority admission controller computed`)},
	{"missing-priorityclass", regexp.MustCompile(`no PriorityClass with name`)},
	{"missing-runtimeclass", regexp.MustCompile(`RuntimeClass … not found`)},
	{"runtimeclass-coupled", regexp.MustCompile(`(?i)overhead|runtimeClass\.scheduling|conflict: runtimeClass`)},
	{"missing-serviceaccount", regexp.MustCompile(`error looking up service account`)},
	{"limitrange", regexp.MustCompile(`(maximum|minimum) .* usage per|limit to request ratio`)},
	{"pod-security", regexp.MustCompile(`violates PodSecurity`)},
	{"request-above-limit", regexp.MustCompile(`must be less than or equal to (cpu|memory|ephemeral-storage|\S+) limit|must be greater than or equal to aggregate container`)},
	{"extended-resource-without-limit", regexp.MustCompile(`Limit must be set for non overcommitable resources|must be equal to \S+ limit`)},
	{"hugepages-quantity", regexp.MustCompile(`positive integer multiple of hugepages|HugePages require cpu or memory`)},
	{"pod-level-resources", regexp.MustCompile(`^Invalid: spec\.resources[.:]`)},
	{"resource-claims", regexp.MustCompile(`resourceClaims|resources\.claims`)},
	{"service-port-name-required", regexp.MustCompile(`spec\.ports\[\*\]\.name: Required value`)},
	{"duplicate-name-after-merge", regexp.MustCompile(`Duplicate value`)},
	{"mount-without-volume", regexp.MustCompile(`(volumeMounts|volumeDevices)\[\*\]\.name: (Not found|Required)|volumeDevices.*block mode|fileKeyRef\.volumeName|must not already exist in volume(Devices|Mounts)`)},
	{"service-ip-families", regexp.MustCompile(`ipFamil|dual-stack`)},
	{"service-type-coupled", regexp.MustCompile(`spec\.clusterIPs?|may only be (set|used) (for|when)|may not be used when .type.|healthCheckNodePort|sessionAffinity`)},
	{"selector-keys-without-selector", regexp.MustCompile(`(matchLabelKeys|mismatchLabelKeys): Forbidden: must not be specified|exists in both matchLabelKeys and mismatchLab`)},
	{"volume-source-incomplete", regexp.MustCompile(`spec\.volumes\[\*\]\.`)},
	{"os-coupled", regexp.MustCompile(`windows pod|linux pod|hostProcess`)},
	{"pod-field-coupled", regexp.MustCompile(`restartPolicy when restart rules|schedulingGates have been cleared|ShareProcessNamespace and HostPID|setHostnameAsFQDN|hostnameOverride|when .hostUsers. is false|valueFrom|divisor|resizePolicy|restartPolicyRules|when 'hostIPC' is true|when 'hostNetwork' is true`)},
}

// familyOf returns the family of a class key.
func familyOf(key string) string {
	for _, f := range families {
		if f.re.MatchString(key) {
			return f.name
		}
	}
	return "unclassified"
}
