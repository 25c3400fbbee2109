package policies

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podpatch/podpatch/policies/profiles"
)

// bucket is the index key: choosing policies for an object looks only at its own bucket.
type bucket struct {
	manager profiles.Manager
	role    profiles.Role
	kind    profiles.Kind
}

// index holds, per bucket, policies in application order: by mode (default, merge, enforce),
// then priority, ConfigMap name, data key and document order.
type index map[bucket][]*Policy

// Set is an immutable, compiled collection of policies. It is safe for concurrent use. Each
// namespace's policies (and the platform's) are indexed on their own, so that a change in one
// namespace is compiled into a new Set that shares every other namespace's index (Replace).
type Set struct {
	platform   *scopeIndex
	namespaces map[string]*scopeIndex
	// namespaced counts the namespace policies; generation is the XOR of every policy's hash.
	namespaced int
	generation [sha256.Size]byte
}

// scopeIndex is the index of the platform's policies or of one namespace's.
type scopeIndex struct {
	buckets index
	// named splits the platform's buckets by namespace: the policies that match.namespaces
	// narrows to namespaces named without a glob are found by the object's namespace, so a
	// platform policy per namespace costs the other namespaces' objects nothing (issue 27).
	named   map[bucket]*namedBucket
	count   int
	dropped []string
	hash    [sha256.Size]byte
}

// namedBucket is a platform bucket split by namespace, each list in application order.
type namedBucket struct {
	any         []*Policy            // no match.namespaces, or one with a glob
	byNamespace map[string][]*Policy // match.namespaces of literal names only, under each
}

// part returns the compiled part of the policy that applies to a kind.
func (p *Policy) part(k profiles.Kind) *patchPart {
	if k == profiles.KindService {
		return p.service
	}
	return p.template
}

// literalNamespaces reports whether a policy names its namespaces without a glob.
func (p *Policy) literalNamespaces() bool {
	if len(p.match.namespaces) == 0 {
		return false
	}
	for _, ns := range p.match.namespaces {
		if strings.ContainsAny(ns, `*?[\`) {
			return false
		}
	}
	return true
}

// candidates calls f, in application order, with the policies of bucket b that may match an
// object in namespace ns: the whole bucket, or for the platform the named ones of ns and those
// of any namespace.
func (x *scopeIndex) candidates(b bucket, ns string, f func(*Policy)) {
	nb := x.named[b]
	if nb == nil {
		for _, p := range x.buckets[b] {
			f(p)
		}
		return
	}
	a, n := nb.any, nb.byNamespace[ns]
	for len(a) > 0 || len(n) > 0 {
		if len(n) == 0 || (len(a) > 0 && comparePolicies(a[0], n[0]) < 0) {
			f(a[0])
			a = a[1:]
		} else {
			f(n[0])
			n = n[1:]
		}
	}
}

// NewSet compiles policies into a Set. Policies are indexed by scope (and namespace), manager,
// role and kind, so the cost of an admission does not grow with unrelated policies. A namespace
// keeps at most MaxNamespacePolicies policies: its ConfigMaps are taken in name order and those
// beyond the limit are left out whole (Dropped).
func NewSet(ps []*Policy) *Set {
	var platform []*Policy
	byNS := map[string][]*Policy{}
	for _, p := range ps {
		if p.Scope == ScopeNamespace {
			byNS[p.Namespace] = append(byNS[p.Namespace], p)
		} else {
			platform = append(platform, p)
		}
	}
	s := &Set{platform: newScopeIndex(platform, false), namespaces: make(map[string]*scopeIndex, len(byNS))}
	xor(&s.generation, s.platform.hash)
	for ns, nps := range byNS {
		idx := newScopeIndex(nps, true)
		s.namespaces[ns] = idx
		s.namespaced += idx.count
		xor(&s.generation, idx.hash)
	}
	return s
}

// Replace returns a Set in which the policies of one scope — the platform's, or one namespace's
// — are ps, sharing every other index with s. Compiling one changed ConfigMap into a Set of
// thousands costs the size of its namespace, not of the Set.
func (s *Set) Replace(scope Scope, namespace string, ps []*Policy) *Set {
	out := *s
	if scope == ScopePlatform {
		out.platform = newScopeIndex(ps, false)
		xor(&out.generation, s.platform.hash)
		xor(&out.generation, out.platform.hash)
		return &out
	}
	out.namespaces = maps.Clone(s.namespaces)
	if old := s.namespaces[namespace]; old != nil {
		out.namespaced -= old.count
		xor(&out.generation, old.hash)
		delete(out.namespaces, namespace)
	}
	if len(ps) > 0 {
		idx := newScopeIndex(ps, true)
		out.namespaces[namespace] = idx
		out.namespaced += idx.count
		xor(&out.generation, idx.hash)
	}
	return &out
}

func newScopeIndex(ps []*Policy, capped bool) *scopeIndex {
	x := &scopeIndex{buckets: index{}}
	if capped {
		ps, x.dropped = capNamespaces(ps)
	}
	x.count = len(ps)
	for _, p := range ps {
		xor(&x.hash, p.hash)
		for _, b := range p.buckets() {
			x.buckets[b] = append(x.buckets[b], p)
		}
	}
	for _, list := range x.buckets {
		slices.SortStableFunc(list, comparePolicies)
	}
	if !capped { // the platform's
		for b, list := range x.buckets {
			if !slices.ContainsFunc(list, (*Policy).literalNamespaces) {
				continue
			}
			nb := &namedBucket{byNamespace: map[string][]*Policy{}}
			for _, p := range list {
				if !p.literalNamespaces() {
					nb.any = append(nb.any, p)
					continue
				}
				for _, ns := range p.match.namespaces {
					if l := nb.byNamespace[ns]; len(l) == 0 || l[len(l)-1] != p { // a name listed twice
						nb.byNamespace[ns] = append(l, p)
					}
				}
			}
			if x.named == nil {
				x.named = map[bucket]*namedBucket{}
			}
			x.named[b] = nb
		}
	}
	return x
}

func xor(dst *[sha256.Size]byte, h [sha256.Size]byte) {
	for i := range dst {
		dst[i] ^= h[i]
	}
}

// Generation identifies the policies a Set holds by their content: two replicas that compiled
// the same ConfigMaps have the same generation, whatever the order of events that led there.
func (s *Set) Generation() string { return hex.EncodeToString(s.generation[:8]) }

// Dropped lists, as namespace/name, the ConfigMaps left out because their namespace holds more
// than MaxNamespacePolicies policies.
func (s *Set) Dropped() []string {
	var out []string
	for _, idx := range s.namespaces {
		out = append(out, idx.dropped...)
	}
	slices.Sort(out)
	return out
}

// Policies lists the policies of one scope, once each, in application order: the platform's
// (namespace is ignored), or one namespace's. For the tools that look at a set as a whole
// (`lint`'s selection check, policies/lint); admission looks up its bucket only.
func (s *Set) Policies(scope Scope, namespace string) []*Policy {
	if scope == ScopePlatform {
		return s.platform.policies()
	}
	if idx := s.namespaces[namespace]; idx != nil {
		return idx.policies()
	}
	return nil
}

// Namespaces lists, sorted, the namespaces whose own policies the set holds.
func (s *Set) Namespaces() []string { return slices.Sorted(maps.Keys(s.namespaces)) }

// policies lists the index's policies once each, in application order.
func (x *scopeIndex) policies() []*Policy {
	seen := map[*Policy]bool{}
	var out []*Policy
	for _, list := range x.buckets {
		for _, p := range list {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b *Policy) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), comparePolicies(a, b))
	})
	return out
}

// Count returns how many policies of a scope the set holds.
func (s *Set) Count(scope Scope) int {
	if scope == ScopePlatform {
		return s.platform.count
	}
	return s.namespaced
}

// Compare orders two policies as a layer applies them: by mode (default, merge, enforce), then
// priority, ConfigMap name, data key and document order.
func (p *Policy) Compare(q *Policy) int { return comparePolicies(p, q) }

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
		managers = profiles.Managers
	}
	if len(roles) == 0 {
		roles = profiles.Roles
	}
	var kinds []profiles.Kind
	if p.template != nil {
		kinds = append(kinds, profiles.KindPod)
	}
	if p.service != nil {
		kinds = append(kinds, profiles.KindService)
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
	id              profiles.Identity
	kind            profiles.Kind
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
	// match, which keeps path.Match's cost within maxGlobBytes × 63.
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

// layers is the stack of reference §3 for one object, low to high, without the object itself
// (which sits between defaults and merges).
type layers struct {
	platformDefault, namespaceDefault []*Policy
	platformMerge, namespaceMerge     []*Policy
	enforce                           []*Policy
	// pins holds the decoded parts of the selected policies while the admission holds the
	// selection (compact.go).
	pins []*treeCell
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
	return layers{platformDefault: l.platformDefault, platformMerge: l.platformMerge, enforce: l.enforce, pins: l.pins}
}

// enforceOnly is the selection's enforce layer alone.
func (l *layers) enforceOnly() layers { return layers{enforce: l.enforce, pins: l.pins} }

func (l *layers) equal(o layers) bool {
	return slices.Equal(l.platformDefault, o.platformDefault) && slices.Equal(l.namespaceDefault, o.namespaceDefault) &&
		slices.Equal(l.platformMerge, o.platformMerge) && slices.Equal(l.namespaceMerge, o.namespaceMerge) &&
		slices.Equal(l.enforce, o.enforce)
}

// any reports whether a policy of the layers satisfies f.
func (l *layers) any(f func(*Policy) bool) bool {
	for _, ps := range [][]*Policy{l.platformDefault, l.namespaceDefault, l.platformMerge, l.namespaceMerge, l.enforce} {
		if slices.ContainsFunc(ps, f) {
			return true
		}
	}
	return false
}

func (l *layers) empty() bool {
	return len(l.platformDefault)+len(l.namespaceDefault)+len(l.platformMerge)+len(l.namespaceMerge)+len(l.enforce) == 0
}

// selectLayers chooses the policies that match the subject and sorts them into layers.
func (s *Set) selectLayers(sub *subject, skip bool) layers {
	var l layers
	b := bucket{sub.id.Manager, sub.id.Role, sub.kind}
	s.platform.candidates(b, sub.namespace, func(p *Policy) {
		if (skip && p.Mode != ModeEnforce) || !p.match.matches(sub) {
			return
		}
		l.pins = append(l.pins, p.part(sub.kind).pin())
		switch p.Mode {
		case ModeDefault:
			l.platformDefault = append(l.platformDefault, p)
		case ModeMerge:
			l.platformMerge = append(l.platformMerge, p)
		default:
			l.enforce = append(l.enforce, p)
		}
	})
	if skip {
		return l
	}
	var nsBucket []*Policy
	if idx := s.namespaces[sub.namespace]; idx != nil {
		nsBucket = idx.buckets[b]
	}
	for _, p := range nsBucket {
		if !p.match.matches(sub) {
			continue
		}
		l.pins = append(l.pins, p.part(sub.kind).pin())
		if p.Mode == ModeDefault {
			l.namespaceDefault = append(l.namespaceDefault, p)
		} else {
			l.namespaceMerge = append(l.namespaceMerge, p)
		}
	}
	return l
}

// selectionReads reports whether a label selector of a policy selectLayers considers for sub
// reads a label that differs (in value or presence) between before and after. When none does,
// the labels policies set cannot change the selection, and the fixed point needs no second one.
func (s *Set) selectionReads(sub *subject, before, after labels.Set) bool {
	changed := func(k string) bool {
		b, inBefore := before[k]
		a, inAfter := after[k]
		return inBefore != inAfter || a != b
	}
	reads := func(ps []*Policy) bool {
		for _, p := range ps {
			if p.match.selector == nil {
				continue
			}
			reqs, selectable := p.match.selector.Requirements()
			if !selectable {
				continue // selects nothing, whatever the labels
			}
			for _, r := range reqs {
				if changed(r.Key()) {
					return true
				}
			}
		}
		return false
	}
	b := bucket{sub.id.Manager, sub.id.Role, sub.kind}
	var platform []*Policy
	s.platform.candidates(b, sub.namespace, func(p *Policy) {
		if p.match.selector != nil {
			platform = append(platform, p)
		}
	})
	if reads(platform) {
		return true
	}
	idx := s.namespaces[sub.namespace]
	return idx != nil && reads(idx.buckets[b])
}

// capNamespaces leaves out the ConfigMaps of one namespace's policies, in name order, from the
// first one that takes the namespace beyond MaxNamespacePolicies policies.
func capNamespaces(ps []*Policy) ([]*Policy, []string) {
	if len(ps) <= MaxNamespacePolicies {
		return ps, nil
	}
	perCM := map[string]int{}
	for _, p := range ps {
		perCM[p.ConfigMap]++
	}
	over := map[string]bool{}
	running := 0
	for _, cm := range slices.Sorted(maps.Keys(perCM)) {
		if running += perCM[cm]; running > MaxNamespacePolicies {
			over[cm] = true
		}
	}
	kept := make([]*Policy, 0, MaxNamespacePolicies)
	for _, p := range ps {
		if !over[p.ConfigMap] {
			kept = append(kept, p)
		}
	}
	dropped := make([]string, 0, len(over))
	for cm := range over {
		dropped = append(dropped, ps[0].Namespace+"/"+cm)
	}
	slices.Sort(dropped)
	return kept, dropped
}
