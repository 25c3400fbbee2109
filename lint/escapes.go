package lint

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/internal/k8sfields"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The rule ids of EnforceWarnings, one per way a container escapes an enforce policy.
const (
	// RulePodFieldOverridable: the policy sets a field of the Pod's securityContext that a
	// container's own securityContext overrides, and not in the "*" entries of containers and
	// initContainers.
	RulePodFieldOverridable = "enforce-pod-field-overridable"
	// RuleInitContainersUncovered: the policy's "*" entry of containers sets what no "*" entry
	// of initContainers sets: native sidecars (restartPolicy: Always) escape it.
	RuleInitContainersUncovered = "enforce-init-containers-uncovered"
)

// Warning is a lint finding that does not fail lint: the policy is valid and applies as written,
// but what it is plainly meant to hold does not hold for every container of the objects it
// enforces.
type Warning struct {
	// File and ConfigMap (namespace/name) locate the policy, as in policies.FileProblems.
	File, ConfigMap string
	Policy          *policies.Policy
	// Rule is the rule id, Field the policy's field, a path in its document.
	Rule, Field string
	// Message says what escapes the policy, Fix what to set instead.
	Message, Fix string
}

// String is the lint line: `FILE: NS/CONFIGMAP: KEY: POLICY: FIELD: warning RULE: MESSAGE; fix: FIX`.
func (w Warning) String() string {
	return fmt.Sprintf("%s: %s: %s: %s: %s: warning %s: %s; fix: %s",
		w.File, w.ConfigMap, w.Policy.Key, w.Policy.Name, w.Field, w.Rule, w.Message, w.Fix)
}

// PodFieldsContainersOverride are the fields of a Pod's securityContext that a container's own
// securityContext overrides (seccompProfile, runAsUser, runAsNonRoot, …): the JSON names that
// corev1.PodSecurityContext and corev1.SecurityContext share, read from k8s.io/api so that a
// field Kubernetes adds to both is counted. Sorted.
var PodFieldsContainersOverride = sharedJSONFields(reflect.TypeFor[corev1.PodSecurityContext](), reflect.TypeFor[corev1.SecurityContext]())

// sharedJSONFields are the JSON names of the fields of struct a that struct b has too, sorted.
func sharedJSONFields(a, b reflect.Type) []string {
	names := func(t reflect.Type) map[string]bool {
		out := map[string]bool{}
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				out[name] = true
			}
		}
		return out
	}
	inB := names(b)
	var out []string
	for name := range names(a) {
		if inB[name] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// initContainerForbidden are the container fields a "*" entry of initContainers may not set
// (an init container may have them only as a native sidecar, restartPolicy: Always): a "*"
// entry of containers that sets them is no reason to warn.
var initContainerForbidden = []string{"lifecycle", "livenessProbe", "readinessProbe", "startupProbe"}

// maxWarnedFields bounds the fields one warning lists.
const maxWarnedFields = 8

// EnforceWarnings finds the platform's enforce policies that containers can escape (reference
// §3, merge rules; §5): a field of the Pod's securityContext a container's own overrides
// (PodFieldsContainersOverride) that the policy does not also set in the "*" entries of
// containers and initContainers (RulePodFieldOverridable), and a "*" entry of containers whose
// fields no "*" entry of initContainers sets (RuleInitContainersUncovered): "*" applies to every
// container of its own list only, and native sidecars are init containers. The ephemeral
// containers `kubectl debug` adds get the "*" entry of containers (reference §5, "Enforce on
// updates"), so they need nothing more. The engine applies such a policy as written; these are
// warnings, which do not fail lint. cms locates ConfigMaps in files.
func EnforceWarnings(s *policies.Set, cms []policies.SourcedConfigMap) []Warning {
	files := map[string]string{}
	for _, c := range cms {
		files[c.ConfigMap.Namespace+"/"+c.ConfigMap.Name] = c.File
	}
	var out []Warning
	for _, p := range s.Policies(policies.ScopePlatform, "") {
		if p.Mode != policies.ModeEnforce {
			continue
		}
		name := p.Namespace + "/" + p.ConfigMap
		for _, w := range enforceWarnings(p.Patch(profiles.KindPod)) {
			w.File, w.ConfigMap, w.Policy = files[name], name, p
			out = append(out, w)
		}
	}
	return out
}

// enforceWarnings is EnforceWarnings for one enforce policy's pod patch; the Warnings it returns
// are not located.
func enforceWarnings(patch map[string]any) []Warning {
	spec, _ := patch["spec"].(map[string]any)
	podSC, _ := spec["securityContext"].(map[string]any)
	star := map[string]map[string]any{} // list -> its "*" entry
	for _, list := range []string{"containers", "initContainers"} {
		entries, _ := spec[list].([]any)
		for _, e := range entries {
			if m, ok := e.(map[string]any); ok && m["name"] == k8sfields.WildcardContainer {
				star[list] = m
			}
		}
	}
	var out []Warning
	initReported := map[string]bool{} // fields of securityContext already said to escape init containers
	for _, f := range PodFieldsContainersOverride {
		v, ok := podSC[f]
		if !ok || v == nil { // unset, or removed: nothing for a container to override
			continue
		}
		var escape []string
		for _, list := range []string{"containers", "initContainers"} {
			sc, _ := star[list]["securityContext"].(map[string]any)
			// A container's own value removed (null) leaves it the Pod's: that holds too.
			if slices.ContainsFunc(leafPaths([]string{f}, v), func(leaf []string) bool { return !has(sc, leaf, true) }) {
				escape = append(escape, list)
				initReported[f] = initReported[f] || list == "initContainers"
			}
		}
		if len(escape) == 0 {
			continue
		}
		who := map[string]string{
			"containers":     "containers (and the ephemeral containers kubectl debug adds)",
			"initContainers": "init containers (native sidecars, restartPolicy: Always, among them)",
		}
		var whos, entries []string
		for _, list := range escape {
			whos = append(whos, who[list])
			entries = append(entries, "of "+list)
		}
		out = append(out, Warning{Rule: RulePodFieldOverridable, Field: "spec.template.spec.securityContext." + f,
			Message: fmt.Sprintf("a container's own securityContext.%s overrides the Pod's: %s that set their own escape this policy", f, strings.Join(whos, " and ")),
			Fix:     fmt.Sprintf(`set securityContext.%s, as at the Pod level, in the "*" entry %s too`, f, strings.Join(entries, " and "))})
	}
	if c := star["containers"]; c != nil {
		var missing []string
		for _, k := range slices.Sorted(maps.Keys(c)) {
			if k == "name" || slices.Contains(initContainerForbidden, k) {
				continue
			}
			for _, leaf := range leafPaths([]string{k}, c[k]) {
				if len(leaf) > 1 && leaf[0] == "securityContext" && initReported[leaf[1]] {
					continue
				}
				if !has(star["initContainers"], leaf, false) {
					missing = append(missing, strings.Join(leaf, "."))
				}
			}
		}
		if len(missing) > 0 {
			listed := missing
			if len(listed) > maxWarnedFields {
				listed = append(slices.Clone(listed[:maxWarnedFields]), fmt.Sprintf("and %d more", len(missing)-maxWarnedFields))
			}
			what := `no "*" entry of initContainers sets`
			if star["initContainers"] != nil {
				what = `the "*" entry of initContainers does not`
			}
			out = append(out, Warning{Rule: RuleInitContainersUncovered, Field: "spec.template.spec.initContainers",
				Message: fmt.Sprintf(`"*" applies to the containers of its own list only: init containers, native sidecars (restartPolicy: Always) among them, escape what the "*" entry of containers sets and %s: %s`,
					what, strings.Join(listed, ", ")),
				Fix: `set the same fields in a "*" entry of initContainers`})
		}
	}
	return out
}

// leafPaths are the paths of the values under v, itself at path at: a non-empty map's leaves,
// else at itself (a scalar, a list, null or an empty map).
func leafPaths(at []string, v any) [][]string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return [][]string{at}
	}
	var out [][]string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, leafPaths(append(slices.Clone(at), k), m[k])...)
	}
	return out
}

// has reports whether m holds a value (null included) at path; with nullAbove, also whether it
// removes (null) a map above it.
func has(m map[string]any, path []string, nullAbove bool) bool {
	for i, k := range path {
		v, ok := m[k]
		switch {
		case !ok:
			return false
		case i == len(path)-1:
			return true
		case v == nil:
			return nullAbove
		}
		if m, ok = v.(map[string]any); !ok {
			return false
		}
	}
	return false
}
