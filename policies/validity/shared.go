package validity

import "github.com/podpatch/podpatch/policies/internal/k8sfields"

// The rules that one policy alone can already break, whatever object it meets: admission decides
// them here on the patched object, and `lint` (package policies, validity_lint.go) on the
// policy's own typed values, with the very same functions. Each side words its own message
// where lint's names a policy's field and admission's a patched object's (lint's are pinned by
// its goldens); where the words are the same, they are here too.

// EachDuplicateName calls dup with the index of every one of n items whose name (name(i), ""
// for none) an earlier item already has: the port names of one container
// (RuleDuplicatePortName).
func EachDuplicateName(n int, name func(i int) string, dup func(i int)) {
	var seen map[string]bool
	for i := range n {
		s := name(i)
		if s == "" {
			continue
		}
		if seen[s] {
			dup(i)
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[s] = true
	}
}

// OneClaimSource reports whether a pod's resource claim names exactly one of its sources,
// resourceClaimName and resourceClaimTemplateName (RuleResourceClaimSource).
func OneClaimSource(hasClaimName, hasTemplateName bool) bool { return hasClaimName != hasTemplateName }

// ClaimSourceMessage is what both sides say when OneClaimSource is false.
const ClaimSourceMessage = "exactly one of resourceClaimName and resourceClaimTemplateName must be set"

// RequestNeedsLimit reports whether a request of a resource without a limit is refused: a
// resource that cannot be overcommitted (extended resources, huge pages) is requested only with
// an equal limit (RuleExtendedResourceLimit), in a container and at pod level.
func RequestNeedsLimit(name string, hasLimit bool) bool {
	return !hasLimit && !k8sfields.ResourceOvercommitAllowed(name)
}
