// Package validity holds the rules a patched Pod or Service must keep (reference §8, "valid in,
// valid out"): what the API server's validation and its built-in admission plugins that run again
// after a webhook (Priority, RuntimeClass, ServiceAccount, LimitRanger, PodSecurity) refuse, for
// the fields a policy can touch and the rules that tie them to others; the environment a check
// runs in (the object's namespace, its labels, the cluster's lookups); and the fields that must
// change together (couple.go).
//
// It knows nothing of policies: the engine (package policies) applies them, checks the result
// here, and leaves out those whose contribution brings a problem the object did not arrive with;
// `lint` checks a policy applied to a synthetic object here too, and reports the violations a
// policy must get right by itself (own.go).
// Objects are read as trees of the JSON kernel (internal/jsontree), never decoded into Go types.
package validity

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Presence says whether a cluster object exists, as far as podpatch's caches know.
type Presence int8

// The three answers of a Cluster.
const (
	// Unknown: no cache, or the cache has not synced; checks that need the object are skipped.
	Unknown Presence = iota
	// Absent: the synced cache does not hold it; the admission plugin would refuse the object.
	Absent
	// Present: it exists.
	Present
)

// PriorityClassInfo is what the Priority admission plugin reads from a PriorityClass.
type PriorityClassInfo struct {
	Value int32
	// PreemptionPolicy is empty when the class does not set one.
	PreemptionPolicy string
}

// RuntimeClassInfo is what the RuntimeClass admission plugin reads from a RuntimeClass.
type RuntimeClassInfo struct {
	// Overhead is the class's pod overhead; nil when it has none.
	Overhead corev1.ResourceList
	// NodeSelector is the class's scheduling node selector, merged into the Pod's (a key with
	// another value is a conflict the plugin refuses).
	NodeSelector map[string]string
}

// Lookups answers, from caches kept current off the request path (never an API call), what the
// admission plugins will look up. Nil Lookups, as in `render` and `lint`, knows nothing: the
// checks that need it are skipped. Implementations answer Unknown until their caches synced.
// One that also knows Kueue's ResourceFlavors implements kueue.Flavors.
type Lookups interface {
	// PriorityClass looks up a PriorityClass by name; the name "" asks for the cluster's global
	// default (Absent: there is none, and the plugin uses priority 0).
	PriorityClass(name string) (PriorityClassInfo, Presence)
	// RuntimeClass looks up a RuntimeClass by name.
	RuntimeClass(name string) (RuntimeClassInfo, Presence)
	// ServiceAccount says whether a ServiceAccount exists.
	ServiceAccount(namespace, name string) Presence
	// LimitRanges returns the limits of a namespace's LimitRanges; ok is false when unknown.
	LimitRanges(namespace string) (items []corev1.LimitRangeItem, ok bool)
	// ServiceIPFamilies returns the IP families the cluster allocates Service cluster IPs
	// from, the primary first (reference §8, families.go); ok is false when unknown.
	ServiceIPFamilies() (families []corev1.IPFamily, ok bool)
}

// Violation is one reason the API server would refuse an object.
type Violation struct {
	// Rule is a stable, bounded id of the rule (the metric's label): request-above-limit, …
	Rule string
	// Field is the path of the offending field in the object.
	Field string
	// Message says what is wrong, for a person.
	Message string
}

func (v Violation) String() string {
	if v.Field == "" {
		return v.Message + " (" + v.Rule + ")"
	}
	return v.Field + ": " + v.Message + " (" + v.Rule + ")"
}

// Compare orders violations by field, then rule: the order in which the first of several is
// chosen, the same one every time.
func Compare(a, b Violation) int {
	if c := strings.Compare(a.Field, b.Field); c != 0 {
		return c
	}
	return strings.Compare(a.Rule, b.Rule)
}

// key identifies a violation for the comparison with the object as given.
func (v Violation) key() string { return v.Rule + "\x00" + v.Field }

// Env is what the checks know besides the object.
type Env struct {
	// Service says the object is a Service; else it is a Pod.
	Service bool
	// Namespace is the object's namespace.
	Namespace string
	// NamespaceLabels are its namespace's labels (Pod Security reads them).
	NamespaceLabels map[string]string
	// Cluster answers the lookups of the admission plugins; nil skips the rules that need it.
	Lookups Lookups
}

// MaxViolations bounds the violations one check records: an object the API server would refuse
// for thousands of reasons (a hostile one) costs no more than this many. When the object as
// given has more, podpatch cannot tell which ones the policies add, and applies them all, as it
// would without the check.
const MaxViolations = 256

// Fresh returns the violations of got that given does not have: the problems an object gained.
func Fresh(got, given []Violation) []Violation {
	if len(got) == 0 {
		return nil
	}
	had := make(map[string]bool, len(given))
	for _, v := range given {
		had[v.key()] = true
	}
	var out []Violation
	for _, v := range got {
		if !had[v.key()] {
			out = append(out, v)
		}
	}
	return out
}
