package policies

import (
	"cmp"
	"maps"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// bucket is the index key: choosing policies for an object looks only at its own bucket.
type bucket struct {
	manager Manager
	role    Role
	kind    Kind
}

// index holds, per bucket, policies in application order: by mode (default, merge, enforce),
// then priority, ConfigMap name, data key and document order.
type index map[bucket][]*Policy

// Set is an immutable, compiled collection of policies. It is safe for concurrent use.
type Set struct {
	platform   index
	namespaces map[string]index
	counts     map[Scope]int
	dropped    []string
}

// NewSet compiles policies into a Set. Policies are indexed by scope (and namespace), manager,
// role and kind, so the cost of an admission does not grow with unrelated policies. A namespace
// keeps at most MaxNamespacePolicies policies: its ConfigMaps are taken in name order and those
// beyond the limit are left out whole (Dropped).
func NewSet(ps []*Policy) *Set {
	s := &Set{platform: index{}, namespaces: map[string]index{}, counts: map[Scope]int{}}
	ps, s.dropped = capNamespaces(ps)
	for _, p := range ps {
		s.counts[p.Scope]++
		idx := s.platform
		if p.Scope == ScopeNamespace {
			if idx = s.namespaces[p.Namespace]; idx == nil {
				idx = index{}
				s.namespaces[p.Namespace] = idx
			}
		}
		for _, b := range p.buckets() {
			idx[b] = append(idx[b], p)
		}
	}
	for _, idx := range append([]index{s.platform}, mapValues(s.namespaces)...) {
		for _, list := range idx {
			slices.SortStableFunc(list, comparePolicies)
		}
	}
	return s
}

// Dropped lists, as namespace/name, the ConfigMaps left out because their namespace holds more
// than MaxNamespacePolicies policies.
func (s *Set) Dropped() []string { return s.dropped }

// capNamespaces leaves out the ConfigMaps of a namespace, in name order, from the first one that
// takes its namespace beyond MaxNamespacePolicies policies.
func capNamespaces(ps []*Policy) ([]*Policy, []string) {
	perCM := map[[2]string]int{} // {namespace, configmap} -> policies
	for _, p := range ps {
		if p.Scope == ScopeNamespace {
			perCM[[2]string{p.Namespace, p.ConfigMap}]++
		}
	}
	over := map[[2]string]bool{}
	running := map[string]int{}
	for _, cm := range slices.SortedFunc(maps.Keys(perCM), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		if running[cm[0]] += perCM[cm]; running[cm[0]] > MaxNamespacePolicies {
			over[cm] = true
		}
	}
	if len(over) == 0 {
		return ps, nil
	}
	kept := make([]*Policy, 0, len(ps))
	for _, p := range ps {
		if !over[[2]string{p.Namespace, p.ConfigMap}] {
			kept = append(kept, p)
		}
	}
	dropped := make([]string, 0, len(over))
	for cm := range over {
		dropped = append(dropped, cm[0]+"/"+cm[1])
	}
	slices.Sort(dropped)
	return kept, dropped
}

// Count returns how many policies of a scope the set holds.
func (s *Set) Count(scope Scope) int { return s.counts[scope] }

func comparePolicies(a, b *Policy) int {
	return cmp.Or(
		cmp.Compare(modeRank(a.Mode), modeRank(b.Mode)),
		cmp.Compare(a.Priority, b.Priority),
		cmp.Compare(a.ConfigMap, b.ConfigMap),
		cmp.Compare(a.Key, b.Key),
		cmp.Compare(a.Index, b.Index),
	)
}

func modeRank(m Mode) int {
	switch m {
	case ModeDefault:
		return 0
	case ModeMerge:
		return 1
	default:
		return 2
	}
}

// buckets lists every (manager, role, kind) this policy can apply to.
func (p *Policy) buckets() []bucket {
	managers, roles := p.match.managers, p.match.roles
	if len(managers) == 0 {
		managers = Managers
	}
	if len(roles) == 0 {
		roles = Roles
	}
	var kinds []Kind
	if p.template != nil {
		kinds = append(kinds, KindPod)
	}
	if p.service != nil {
		kinds = append(kinds, KindService)
	}
	var out []bucket
	for _, m := range managers {
		for _, r := range roles {
			for _, k := range kinds {
				out = append(out, bucket{m, r, k})
			}
		}
	}
	return out
}

// subject is what matching looks at.
type subject struct {
	id              Identity
	kind            Kind
	namespace       string
	labels          labels.Set
	namespaceLabels labels.Set
}

// matches checks the parts of the match that the index does not already decide.
func (m *matcher) matches(s *subject) bool {
	if len(m.clusters) > 0 && !anyGlob(m.clusters, s.id.Cluster) {
		return false
	}
	if len(m.groups) > 0 && !anyGlob(m.groups, s.id.Group) {
		return false
	}
	if len(m.namespaces) > 0 && !anyGlob(m.namespaces, s.namespace) {
		return false
	}
	if m.selector != nil && !m.selector.Matches(s.labels) {
		return false
	}
	if m.namespaceSelector != nil && !m.namespaceSelector.Matches(s.namespaceLabels) {
		return false
	}
	return true
}

// anyGlob matches a name against globs; an object without the name (a scheduler has no worker
// group) never matches a policy that asks for one.
func anyGlob(globs []string, name string) bool {
	// Names come from label values and namespace names, at most 63 bytes where Kubernetes
	// validates them; a longer one (labels are not yet validated in mutating admission) is no
	// match, which keeps path.Match's cost within MaxGlobBytes × 63.
	if name == "" || len(name) > validation.LabelValueMaxLength {
		return false
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok { // patterns were validated when parsed
			return true
		}
	}
	return false
}

// layers is the stack of SPEC §3 for one object, low to high, without the object itself
// (which sits between defaults and merges).
type layers struct {
	platformDefault, namespaceDefault []*Policy
	platformMerge, namespaceMerge     []*Policy
	enforce                           []*Policy
}

// all lists the policies in provenance order.
func (l *layers) all() []*Policy {
	return slices.Concat(l.platformDefault, l.namespaceDefault, l.platformMerge, l.namespaceMerge, l.enforce)
}

// platform and namespace list the policies of each scope, in provenance order.
func (l *layers) platform() []*Policy {
	return slices.Concat(l.platformDefault, l.platformMerge, l.enforce)
}

func (l *layers) namespace() []*Policy { return slices.Concat(l.namespaceDefault, l.namespaceMerge) }

func (l *layers) hasNamespace() bool { return len(l.namespaceDefault)+len(l.namespaceMerge) > 0 }

// platformOnly is the selection without namespace policies.
func (l *layers) platformOnly() layers {
	return layers{platformDefault: l.platformDefault, platformMerge: l.platformMerge, enforce: l.enforce}
}

func (l *layers) equal(o layers) bool {
	return slices.Equal(l.all(), o.all())
}

func (l *layers) empty() bool {
	return len(l.platformDefault)+len(l.namespaceDefault)+len(l.platformMerge)+len(l.namespaceMerge)+len(l.enforce) == 0
}

// selectLayers chooses the policies that match the subject and sorts them into layers.
func (s *Set) selectLayers(sub *subject, skip bool) layers {
	var l layers
	b := bucket{sub.id.Manager, sub.id.Role, sub.kind}
	for _, p := range s.platform[b] {
		if (skip && p.Mode != ModeEnforce) || !p.match.matches(sub) {
			continue
		}
		switch p.Mode {
		case ModeDefault:
			l.platformDefault = append(l.platformDefault, p)
		case ModeMerge:
			l.platformMerge = append(l.platformMerge, p)
		default:
			l.enforce = append(l.enforce, p)
		}
	}
	if skip {
		return l
	}
	for _, p := range s.namespaces[sub.namespace][b] {
		if !p.match.matches(sub) {
			continue
		}
		if p.Mode == ModeDefault {
			l.namespaceDefault = append(l.namespaceDefault, p)
		} else {
			l.namespaceMerge = append(l.namespaceMerge, p)
		}
	}
	return l
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
