package policies

import (
	"encoding/json"
	"path"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The select stage (doc.go): the policies of one object, from its own bucket of the Set, that
// its namespace, labels, cluster and group match, sorted into the layers of reference §3.

// subject is what matching looks at.
type subject struct {
	id              profiles.Identity
	kind            profiles.Kind
	namespace       string
	labels          labels.Set
	namespaceLabels labels.Set
	// skip: the object is labelled podpatch.io/skip, which selects only the platform's
	// enforce policies (reference §2).
	skip bool
}

// relabelled is the subject with the labels policies set on it.
func (s *subject) relabelled(l labels.Set) *subject {
	c := *s
	c.labels = l
	return &c
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

// all lists the policies in provenance order.
func (l *layers) all() []*Policy {
	return slices.Concat(l.platformDefault, l.namespaceDefault, l.platformMerge, l.namespaceMerge, l.enforce)
}

// atPlace is a default layer without the policies kept below the others (layers.under).
func (l *layers) atPlace(ps []*Policy) []*Policy {
	return slices.DeleteFunc(slices.Clone(ps), func(p *Policy) bool { return slices.Contains(l.under, p) })
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

// without is the selection without the policies of drop.
func (l *layers) without(drop map[*Policy]bool) layers {
	f := func(ps []*Policy) []*Policy {
		return slices.DeleteFunc(slices.Clone(ps), func(p *Policy) bool { return drop[p] })
	}
	return layers{platformDefault: f(l.platformDefault), namespaceDefault: f(l.namespaceDefault),
		platformMerge: f(l.platformMerge), namespaceMerge: f(l.namespaceMerge), enforce: f(l.enforce),
		under: f(l.under), pins: l.pins}
}

// enforceOnly is the selection's enforce layer alone.
func (l *layers) enforceOnly() layers { return layers{enforce: l.enforce, pins: l.pins} }

// enforceKept is the enforce layer alone and, when keep is set (Input.keepEnforce: an update,
// PatchUpdate), only the policies of it that keep keeps.
func (l *layers) enforceKept(keep func(*Policy) bool) layers {
	e := l.enforceOnly()
	if keep != nil {
		e.enforce = slices.DeleteFunc(slices.Clone(e.enforce), func(p *Policy) bool { return !keep(p) })
	}
	return e
}

func (l *layers) equal(o layers) bool {
	return slices.Equal(l.platformDefault, o.platformDefault) && slices.Equal(l.namespaceDefault, o.namespaceDefault) &&
		slices.Equal(l.platformMerge, o.platformMerge) && slices.Equal(l.namespaceMerge, o.namespaceMerge) &&
		slices.Equal(l.enforce, o.enforce) && slices.Equal(l.under, o.under)
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
func (s *Set) selectLayers(sub *subject) layers {
	skip := sub.skip
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

// Enforcing returns the platform's enforce policies selected for an object as it arrives (its
// first selection, before the labels policies set), for an answer that does not patch it: the
// webhook's fallback when it is overloaded or out of budget denies an object these bind
// (reference §5). Recognition and selection only, no merge; nil for an object no profile
// recognises or whose metadata.namespace is not Input.Namespace.
func (s *Set) Enforcing(in Input) []*Policy {
	t := jsontree.New()
	obj, ok := t.Decode(json.RawMessage(in.Object)).(map[string]any)
	if !ok {
		return nil
	}
	meta, _ := t.GetMap(obj, "metadata")
	if v, set := meta["namespace"]; set && v != nil && v != "" && v != in.Namespace {
		return nil // the API server refuses it (reference §5)
	}
	objLabels, id, recognised := recognise(t, obj, meta, in.Kind)
	if !recognised {
		return nil
	}
	sub := &subject{id: id, kind: in.Kind, namespace: in.Namespace, labels: objLabels, namespaceLabels: in.NamespaceLabels, skip: true}
	return s.selectLayers(sub).enforce
}

// EnforcingAny returns the platform's enforce policies that could bind some object of a kind
// ("": any kind) in a namespace, whatever its manager, role and labels: for an answer to a
// request of which only the head was read (reference §5).
func (s *Set) EnforcingAny(kind profiles.Kind, namespace string, namespaceLabels map[string]string) []*Policy {
	var out []*Policy
	for _, p := range s.platform.policies() {
		if p.Mode != ModeEnforce || (kind != "" && p.part(kind) == nil) {
			continue
		}
		if kind == "" && p.template == nil && p.service == nil {
			continue
		}
		m := p.match
		if len(m.namespaces) > 0 && !anyGlob(m.namespaces, namespace) {
			continue
		}
		if m.namespaceSelector != nil && !m.namespaceSelector.Matches(labels.Set(namespaceLabels)) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// recognise reads an object's labels (and a Service's selector) and recognises it by them.
func recognise(t *jsontree.Tree, obj, meta map[string]any, kind profiles.Kind) (labels.Set, profiles.Identity, bool) {
	labelsV, _ := t.Get(meta, "labels")
	objLabels := stringMap(labelsV)
	var selector map[string]string
	if kind == profiles.KindService {
		spec, _ := t.GetMap(obj, "spec")
		selectorV, _ := t.Get(spec, "selector")
		selector = stringMap(selectorV)
	}
	id, ok := profiles.Recognise(kind, objLabels, selector)
	return objLabels, id, ok
}

// stringMap reads a JSON object of strings (labels, a selector); other values are ignored.
func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}
