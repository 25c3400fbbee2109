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
