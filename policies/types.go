package policies

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/internal/k8sfields"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// The types every stage needs, at the bottom of the pipeline (doc.go): the names of the product
// contract, a policy's mode and scope, the compiled Policy and its accessors, a selection's
// layers, and what an apply takes (Input) and gives (Result, Change, Skipped, Fallback, the
// errors). Every stage's file reads them; they read no stage's file but compact.go (a
// Policy's patches as compact JSON).

// Names fixed by the product contract (reference §1).
const (
	// APIVersion is the apiVersion of a policy document.
	APIVersion = "podpatch.io/v1alpha1"
	// DocumentKind is the kind of a policy document.
	DocumentKind = "PodTemplatePatch"
	// PolicyLabel marks a ConfigMap as holding policies; its value must be "true".
	PolicyLabel = "podpatch.io/policy"
	// AppliedAnnotation lists, on every patched object, the policies that matched it.
	AppliedAnnotation = "podpatch.io/applied"
	// SkipLabel on a Pod or Service opts it out of every layer but `enforce`.
	SkipLabel = "podpatch.io/skip"
	// DefaultPlatformNamespace is where platform-wide policies live unless configured otherwise.
	DefaultPlatformNamespace = "podpatch-system"
)

// ReservedLabels are the labels no policy may set, change or remove (reference §3): the skip
// label and every label a profile reads to recognise an object and its role, cluster and group
// (profiles.Labels). Changing them would change which policies match, or what the manager finds.
func ReservedLabels() []string {
	out := append(profiles.Labels(), SkipLabel)
	slices.Sort(out)
	return slices.Compact(out)
}

// Mode says where a policy sits relative to the object in the layer stack.
type Mode string

// The three policy modes (reference §3).
const (
	// ModeDefault fills only what the object leaves unset.
	ModeDefault Mode = "default"
	// ModeMerge overrides the object.
	ModeMerge Mode = "merge"
	// ModeEnforce overrides everything, including namespace policies; platform scope only.
	ModeEnforce Mode = "enforce"
)

// Scope says where a policy applies.
type Scope string

// The two scopes.
const (
	// ScopePlatform policies live in the platform namespace and apply everywhere.
	ScopePlatform Scope = "platform"
	// ScopeNamespace policies apply only to objects in their own namespace.
	ScopeNamespace Scope = "namespace"
)

// Policy is one validated, compiled PodTemplatePatch. It is immutable once parsed.
type Policy struct {
	// Namespace, ConfigMap and Key locate the document; Index is its position in the key's stream.
	Namespace, ConfigMap, Key string
	Index                     int
	// Name is metadata.name of the document.
	Name     string
	Scope    Scope
	Mode     Mode
	Priority int32
	// Ref is the provenance entry: <namespace>/<configmap>/<name>[@<resourceVersion>].
	Ref string
	// hash identifies the policy's content and place, for Set.Generation.
	hash [sha256.Size]byte

	match    matcher
	template *patchPart // {"metadata": …, "spec": …} as written, nulls kept (compact.go)
	service  *patchPart
}

// matcher is the compiled form of Match.
type matcher struct {
	managers          []profiles.Manager
	roles             []profiles.Role
	clusters, groups  []string
	namespaces        []string
	selector          labels.Selector // nil: any
	namespaceSelector labels.Selector // nil: any
}

// Selector is the policy's compiled match.selector; nil when it has none.
func (p *Policy) Selector() labels.Selector { return p.match.selector }

// Managers is the policy's match.managers, each once; empty: any. Shared: read only.
func (p *Policy) Managers() []profiles.Manager { return p.match.managers }

// Roles is the policy's match.roles as canonical roles, each once; empty: any. Shared: read
// only.
func (p *Policy) Roles() []profiles.Role { return p.match.roles }

// Unconditional reports whether the policy is selected for every object of its managers and
// roles (and, for a namespace policy, of its namespace): no label requirement, no
// namespaceSelector, namespaces, clusters or groups.
func (p *Policy) Unconditional() bool {
	m := p.match
	noReqs := m.selector == nil
	if m.selector != nil {
		reqs, selectable := m.selector.Requirements()
		noReqs = selectable && len(reqs) == 0
	}
	return noReqs && m.namespaceSelector == nil && len(m.namespaces) == 0 && len(m.clusters) == 0 && len(m.groups) == 0
}

// Patch returns the part of the policy that applies to a kind, as written ({"metadata": …,
// "spec": …}, nulls kept): shared, read only; nil when the policy has none.
func (p *Policy) Patch(k profiles.Kind) map[string]any {
	if k == profiles.KindService {
		return p.service.get()
	}
	return p.template.get()
}

// Provenance is Ref, the policy's provenance entry: what the checks name a policy by
// (checks.Policy).
func (p *Policy) Provenance() string { return p.Ref }

// The errors Apply returns (wrapped): the merge stops with ErrStopped, and every stage above
// reads them.

// ErrStopped is returned (wrapped) by Apply when Input.Done closed before it finished.
var ErrStopped = errors.New("stopped: the request budget ran out")

// ErrNamespaceMismatch is returned (wrapped) by Apply for an object whose metadata.namespace is
// set and is not Input.Namespace: which namespace's policies apply would be ambiguous, so none
// do (reference §5).
var ErrNamespaceMismatch = errors.New("the object's metadata.namespace is not the request's namespace")

// ErrSelectionDiverges is returned (wrapped) when the labels policies set keep changing which
// policies match beyond MaxSelectionRounds: their selectors contradict each other. `lint`
// reports policy sets that can do this (lint.SelectionProblems).
var ErrSelectionDiverges = errors.New("the labels policies set keep changing which policies match")

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
	// EnforceDone, when set, is the budget reserved for the platform's enforce policies: when
	// Done closes before every layer applied, the enforce policies are applied alone until
	// EnforceDone closes too (reference §5, "Enforce: applied or denied"). The webhook closes
	// Done before its budget ends and EnforceDone at its end.
	EnforceDone <-chan struct{}
	// Lookups answers whether the cluster objects the patched object references exist (reference §8);
	// nil (render, lint) skips the checks that need it.
	Lookups validity.Lookups
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
	// FallbackEnforceFirst: the other layers could not be applied within the request budget or
	// the bound of work (or made the object unpatchable); the platform's enforce policies
	// applied alone, in the budget reserved for them.
	FallbackEnforceFirst Fallback = "enforce-first"
)

// Result is the outcome of Apply.
type Result struct {
	// Object is the patched JSON; when no policy matched it is Input.Object itself.
	Object []byte
	// Patch is the JSONPatch (RFC 6902) from Input.Object to Object; nil when unchanged.
	Patch []byte
	// Changed is false when no policy matched.
	Changed bool
	// NotHeld, for an update (PatchUpdate), names the enforce policies matching the object as
	// stored before it which it did not hold (Set.Holding): those whose fields were not all
	// there were not applied to the update. NotHeldAt says, for each, where it first did not
	// hold and how (a path, never a value).
	NotHeld   []string
	NotHeldAt []string
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
	// Denied says that platform enforce policies match the object but cannot all be applied to
	// it (reference §5, "Enforce: applied or denied"): Skipped names each and why (a conflict
	// with a field of the object, a missing reference, its size, the work, the budget). The
	// webhook denies the object; Object and Patch are what the other policies made of it, for
	// the tools that show it.
	Denied bool
	// NoEffect are the fields applied policies set that the cluster's Kubernetes version drops
	// (policies/versions; known through Input.Lookups): the policy is not applied for them
	// (reference §8), the webhook warns and counts each.
	NoEffect []NoEffect
	// Adjusted says which fields were changed with others so that the object stays valid
	// (spec.priority removed when policies change spec.priorityClassName, …).
	Adjusted []string
	// Findings are the manager-aware checks' findings on the patched object (reference §8),
	// in a stable order.
	Findings []checks.Finding

	// violations are the patched object's (package validity); selection is the layers applied.
	violations []validity.Violation
	selection  layers
	// patched is the patched object's tree, for the checks (checks.go); labels are its labels.
	patched map[string]any
	labels  labels.Set
}

// Change is what one policy did to one object.
type Change struct {
	Policy *Policy
	// Fields are the paths it set or removed; empty when the object already had its values.
	Fields []string
}

// NoEffect is a field a policy sets that the cluster drops.
type NoEffect struct {
	Policy *Policy
	// Field is where the policy sets it; Gate the feature gate that is off.
	Field, Gate string
	// Message says so, naming the version: "has no effect on Kubernetes 1.34: …".
	Message string
}

// String says which policy's field has no effect, in one line.
func (n NoEffect) String() string {
	return fmt.Sprintf("policy %s: %s %s", n.Policy.Ref, n.Field, n.Message)
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
	if s.Policy.Mode == ModeEnforce {
		return fmt.Sprintf("enforce policy %s cannot be applied: %s", s.Policy.Ref, s.Violation)
	}
	return fmt.Sprintf("policy %s left out: %s", s.Policy.Ref, s.Violation)
}

// Denial is the message of an admission denial of a Result that is Denied: the enforce
// policies that cannot be applied and why, at most maxDenialPolicies of them, within
// maxDenialBytes.
func (r *Result) Denial() string {
	var b strings.Builder
	b.WriteString("podpatch: the platform's enforce policies must hold on this object and cannot be applied: ")
	n := 0
	for _, sk := range r.Skipped {
		if sk.Policy.Mode != ModeEnforce {
			continue
		}
		if n == maxDenialPolicies {
			fmt.Fprintf(&b, "; and more (podpatch render --explain lists them)")
			break
		}
		if n > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", sk.Policy.Ref, sk.Violation)
		n++
	}
	msg := b.String()
	if len(msg) > maxDenialBytes {
		msg = strings.ToValidUTF8(msg[:maxDenialBytes-3], "") + "..."
	}
	return msg
}

// Bounds of a denial's message: kubectl prints it whole.
const (
	maxDenialPolicies = 4
	maxDenialBytes    = 1024
)

// layers is the stack of reference §3 for one object, low to high, without the object itself
// (which sits between defaults and merges).
type layers struct {
	platformDefault, namespaceDefault []*Policy
	platformMerge, namespaceMerge     []*Policy
	enforce                           []*Policy
	// under are defaults (of the two default layers) that fill after every other default, each
	// after those before it, and whose containers are inserted after every other policy's:
	// keepValid keeps there a default whose contribution at its place makes the object invalid
	// and below the policies kept before it does not, as a second admission would keep it
	// (keepvalid.go).
	under []*Policy
	// pins holds the decoded parts of the selected policies while the admission holds the
	// selection (compact.go).
	pins []*treeCell
}

// wildcardContainer is the container name that applies an entry to every container of a list.
const wildcardContainer = k8sfields.WildcardContainer

// mainContainerName addresses the manager's main container in a policy.
const mainContainerName = k8sfields.MainContainer
