package policies

import (
	"fmt"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// The types every stage of an apply shares, above the policies (parse.go) and their selection
// (set.go), below the stages that fill them: layers.go, kueue.go, validity.go, checks*.go.

// Input is one object to patch.
type Input struct {
	// Kind is KindPod or KindService.
	Kind profiles.Kind
	// Object is the object's JSON, exactly as received.
	Object []byte
	// Namespace is used when the object has no metadata.namespace (Pods created by
	// ReplicaSets may arrive without one); the request's namespace in the webhook.
	Namespace string
	// NamespaceFromRequest makes Namespace the only namespace that selects policies, as the
	// webhook's request namespace is (reference §5): an object whose metadata.namespace is set and
	// says another is not patched, and Apply returns an error wrapping ErrNamespaceMismatch.
	NamespaceFromRequest bool
	// NamespaceLabels are the labels of the object's namespace, for match.namespaceSelector.
	NamespaceLabels map[string]string
	// Explain records, for each applied policy, which fields it changed (Apply only).
	Explain bool
	// Done, when set, is the webhook's request budget: once it is closed Apply stops between
	// steps and returns an error wrapping ErrStopped, leaving the object unpatched.
	Done <-chan struct{}
	// Cluster answers whether the cluster objects the patched object references exist (reference §8);
	// nil (render, lint) skips the checks that need it.
	Cluster validity.Cluster
}

// Fallback names the way Apply left whole layers out so that the rest still applies.
type Fallback string

const (
	// FallbackNone: every selected layer applied.
	FallbackNone Fallback = ""
	// FallbackNamespace: namespace policies made the object unpatchable; the platform's applied
	// alone.
	FallbackNamespace Fallback = "namespace"
	// FallbackEnforceOnly: the platform's selectors contradict each other; its enforce policies
	// applied alone.
	FallbackEnforceOnly Fallback = "enforce-only"
)

// Result is the outcome of Apply.
type Result struct {
	// Object is the patched JSON; when no policy matched it is Input.Object itself.
	Object []byte
	// Patch is the JSONPatch (RFC 6902) from Input.Object to Object; nil when unchanged.
	Patch []byte
	// Changed is false when no policy matched.
	Changed bool
	// Recognised is false for objects no profile recognises; Identity is then empty.
	Recognised bool
	Identity   profiles.Identity
	// Applied lists the matching policies in layer order.
	Applied []*Policy
	// Changes says, with Input.Explain, which fields each applied policy changed.
	Changes []Change
	// Warnings say what was left out: the webhook returns them as admission warnings.
	Warnings []string
	// Fallback says which policies were left out as a whole, and why, when Warnings say so.
	Fallback Fallback
	// Skipped lists the policies left out because their contribution would have made the
	// object invalid (reference §8), in application order; they are not in Applied.
	Skipped []Skipped
	// Adjusted says which fields were changed with others so that the object stays valid
	// (spec.priority removed when policies change spec.priorityClassName, …).
	Adjusted []string
	// Findings are the manager-aware checks' findings on the patched object (reference §8),
	// in a stable order.
	Findings []checks.Finding

	// violations are the patched object's (package validity); selection is the layers applied.
	violations []validity.Violation
	selection  layers
	// patched is the patched object's tree, for the checks (checks.go).
	patched map[string]any
}

// Change is what one policy did to one object.
type Change struct {
	Policy *Policy
	// Fields are the paths it set or removed; empty when the object already had its values.
	Fields []string
}

// Skipped is a policy left out of one object because its contribution would make the object
// invalid (reference §8).
type Skipped struct {
	Policy *Policy
	// Violation is the first problem the policy's contribution brought.
	Violation validity.Violation
}

// String says which policy was left out and why, in one line.
func (s Skipped) String() string {
	what := "policy " + s.Policy.Ref
	if s.Policy.Mode == ModeEnforce {
		what = "enforce policy " + s.Policy.Ref + " (the audit reports the object)"
	}
	return fmt.Sprintf("%s left out: %s", what, s.Violation)
}

// Replaced says, for each change of an explained Result (by its index in changes), which of its
// fields a later policy changed again, and which policy that was (the last one): a value this
// policy set that a higher layer then replaced, as a namespace policy's label that a platform
// enforce policy overrides. `render --explain` and `podpatch explain` mark them, so that neither
// says a policy's value is in the object when it is not (issue 37). A field counts as changed
// again when a later change names it, a field inside it, or a field it lies inside. Linear in
// the fields: each is looked up by itself and its prefixes.
func Replaced(changes []Change) []map[string]*Policy {
	out := make([]map[string]*Policy, len(changes))
	later := map[string]*Policy{} // a field a later change names, and every prefix of it
	exact := map[string]*Policy{} // the fields later changes name
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		for _, f := range c.Fields {
			by := later[f] // f itself, or a field inside it
			for p := range pathPrefixes(f) {
				if by == nil {
					by = exact[p] // a later change replaced a field f lies inside
				}
			}
			if by != nil {
				if out[i] == nil {
					out[i] = map[string]*Policy{}
				}
				out[i][f] = by
			}
		}
		for _, f := range c.Fields {
			if _, ok := exact[f]; !ok {
				exact[f] = c.Policy
			}
			if _, ok := later[f]; !ok {
				later[f] = c.Policy
			}
			for p := range pathPrefixes(f) {
				if _, ok := later[p]; !ok {
					later[p] = c.Policy
				}
			}
		}
	}
	return out
}

// pathPrefixes yields the proper prefixes of a field path that are fields themselves: before
// each '.' or '[' outside brackets (spec.containers[worker].resources: spec, spec.containers,
// spec.containers[worker]).
func pathPrefixes(path string) func(func(string) bool) {
	return func(yield func(string) bool) {
		depth := 0
		for i := 0; i < len(path); i++ {
			switch path[i] {
			case '[':
				if depth == 0 && i > 0 && !yield(path[:i]) {
					return
				}
				depth++
			case ']':
				depth--
			case '.':
				if depth == 0 && i > 0 && !yield(path[:i]) {
					return
				}
			}
		}
	}
}
