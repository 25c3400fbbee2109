package policies

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/internal/yamljson"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The Set (doc.go: compile): policies indexed by scope and namespace, then by manager, role and
// kind, built from policies (NewSet) or from ConfigMaps (Compile, at the end), and changed one
// scope at a time (Replace).

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
	// platform policy per namespace costs the other namespaces' objects nothing.
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
// (`lint`'s selection check, package lint); admission looks up its bucket only.
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

// Many ConfigMaps at once, as lint, render and the policy directory read them: each parsed,
// the valid ones compiled into a Set, the problems of the others located in their files.

// SourcedConfigMap is a policy ConfigMap and the file it was read from (policyfiles), or
// where else it came from.
type SourcedConfigMap struct {
	File      string
	ConfigMap *corev1.ConfigMap
	// KeyLines are where the data keys stand in File, when known (a ConfigMap read from YAML
	// text, not from a List): a YAML error inside a key's text is then given the file's line.
	KeyLines map[string]yamljson.KeyLine
}

// FileProblems are the problems of one ConfigMap read from a file.
type FileProblems struct {
	File      string
	ConfigMap string // namespace/name
	Problems  Problems
}

// Lines renders `FILE: <configmap ns/name>: <data key>: <policy>: <field path>: <message>`,
// the format of `podpatch lint`.
func (f FileProblems) Lines() []string {
	out := make([]string, len(f.Problems))
	for i, p := range f.Problems {
		out[i] = f.File + ": " + f.ConfigMap + ": " + p.String()
	}
	return out
}

// Compile parses every ConfigMap and builds a Set of the valid ones. Invalid ConfigMaps are
// left out whole and reported.
func Compile(cms []SourcedConfigMap, opts Options) (*Set, []FileProblems) {
	var all []*Policy
	var probs []FileProblems
	files := map[string]string{} // namespace/name -> file
	for _, s := range cms {
		name := s.ConfigMap.Namespace + "/" + s.ConfigMap.Name
		files[name] = s.File
		ps, errs := ParseConfigMap(s.ConfigMap, opts)
		if len(errs) > 0 {
			locateYAMLErrors(errs, s)
			probs = append(probs, FileProblems{File: s.File, ConfigMap: name, Problems: errs})
			continue
		}
		all = append(all, ps...)
	}
	set := NewSet(all)
	for _, name := range set.Dropped() {
		probs = append(probs, FileProblems{File: files[name], ConfigMap: name, Problems: Problems{{Err: tooManyNamespacePolicies()}}})
	}
	return set, probs
}

// tooManyNamespacePolicies is the problem of a ConfigMap left out of a Set (Set.Dropped).
func tooManyNamespacePolicies() *field.Error {
	return field.Forbidden(field.NewPath("data"), fmt.Sprintf(
		"left out: its namespace already holds %d policies in ConfigMaps named before it (the limit per namespace)",
		MaxNamespacePolicies))
}

// ProblemLines flattens problems into lint lines.
func ProblemLines(fps []FileProblems) string {
	var lines []string
	for _, f := range fps {
		lines = append(lines, f.Lines()...)
	}
	return strings.Join(lines, "\n")
}

// yamlError is how the parse stage words a YAML error inside a data key's text (parse.go): the
// document of the key's stream, the line within that document, and what is wrong.
var yamlError = regexp.MustCompile(`^not valid YAML: document (\d+): (?:yaml: )?line (\d+): `)

// locateYAMLErrors gives each YAML error inside a data key the line of the file it stands at
// (for a block scalar, whose lines are the file's) and the line of its data key, which the
// error's own line, counted within the key's text, does not say.
func locateYAMLErrors(errs Problems, s SourcedConfigMap) {
	for _, p := range errs {
		kl, ok := s.KeyLines[p.Key]
		if !ok || p.Err == nil {
			continue
		}
		m := yamlError.FindStringSubmatchIndex(p.Err.Detail)
		if m == nil {
			continue
		}
		doc, _ := strconv.Atoi(p.Err.Detail[m[2]:m[3]])
		line, _ := strconv.Atoi(p.Err.Detail[m[4]:m[5]])
		where := fmt.Sprintf("the key is at line %d of %s", kl.Line, s.File)
		if start := documentStart(s.ConfigMap.Data[p.Key], doc); kl.Block && start > 0 {
			where = fmt.Sprintf("line %d of %s, whose key is at line %d", kl.Line+start-1+line, s.File, kl.Line)
		}
		p.Err.Detail = fmt.Sprintf("not valid YAML: document %d: line %d of the key's text (%s): %s",
			doc, line, where, p.Err.Detail[m[1]:])
	}
}

// documentStart is the line (from 1) of a stream's text where its document n (from 1) starts:
// after the n-1th "---" line, as the stream is split; 0 when there is no such document.
func documentStart(text string, n int) int {
	if n == 1 {
		return 1
	}
	seen := 0
	for i, line := range strings.Split(text, "\n") {
		if line == "---" || strings.HasPrefix(line, "--- ") {
			if seen++; seen == n-1 {
				return i + 2
			}
		}
	}
	return 0
}
