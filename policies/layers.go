package policies

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Input is one object to patch.
type Input struct {
	// Kind is KindPod or KindService.
	Kind Kind
	// Object is the object's JSON, exactly as received.
	Object []byte
	// Namespace is used when the object has no metadata.namespace (Pods created by
	// ReplicaSets may arrive without one); the request's namespace in the webhook.
	Namespace string
	// NamespaceLabels are the labels of the object's namespace, for match.namespaceSelector.
	NamespaceLabels map[string]string
	// Explain records, for each applied policy, which fields it changed.
	Explain bool
	// PatchOnly leaves Result.Object unset: the webhook needs only the JSONPatch.
	PatchOnly bool
	// Validated says Object is known to be valid JSON (the webhook decoded the review that
	// carries it), so Apply does not scan it again.
	Validated bool
	// Done, when set, is the webhook's request budget: once it is closed Apply stops between
	// steps and returns an error wrapping ErrStopped, leaving the object unpatched.
	Done <-chan struct{}
}

// ErrStopped is returned (wrapped) by Apply when Input.Done closed before it finished.
var ErrStopped = errors.New("stopped: the request budget ran out")

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
	Identity   Identity
	// Applied lists the matching policies in layer order.
	Applied []*Policy
	// Changes says, with Input.Explain, which fields each applied policy changed.
	Changes []Change
}

// Change is what one policy did to one object.
type Change struct {
	Policy *Policy
	// Fields are the paths it set or removed; empty when the object already had its values.
	Fields []string
}

// Apply patches one object with the matching policies of the set, in the layer order of
// SPEC §3, working on the raw JSON so that fields unknown to this build survive. It is the
// single code path of both the webhook and `podpatch render`. It is deterministic and
// idempotent: applying its result again gives the same object.
func (s *Set) Apply(in Input) (Result, error) {
	res := Result{Object: in.Object}
	if !in.Validated && !json.Valid(in.Object) {
		return res, fmt.Errorf("decode %s: not valid JSON", strings.ToLower(string(in.Kind)))
	}
	t := newTree()
	obj, ok := t.decode(json.RawMessage(in.Object)).(map[string]any)
	if !ok {
		return res, fmt.Errorf("decode %s: expected a JSON object", strings.ToLower(string(in.Kind)))
	}
	if in.Explain {
		expandAll(obj)
	}
	meta, _ := t.getMap(obj, "metadata")
	labelsV, _ := t.get(meta, "labels")
	objLabels := stringMap(labelsV)
	var selector map[string]string
	if in.Kind == KindService {
		spec, _ := t.getMap(obj, "spec")
		selectorV, _ := t.get(spec, "selector")
		selector = stringMap(selectorV)
	}
	id, recognised := Recognise(in.Kind, objLabels, selector)
	if !recognised {
		return res, nil
	}
	res.Recognised, res.Identity = true, id
	ns, _ := meta["namespace"].(string)
	if ns == "" {
		ns = in.Namespace
	}
	sub := &subject{id: id, kind: in.Kind, namespace: ns, labels: objLabels, namespaceLabels: in.NamespaceLabels}
	l := s.selectLayers(sub, objLabels[SkipLabel] == "true")
	if l.empty() {
		return res, nil
	}

	res.Applied = l.all()
	st := &applyState{t: t, done: in.Done}
	if in.Kind == KindPod {
		m := newMerger(st, in.Kind, false)
		for _, p := range res.Applied {
			m.insertSidecars(obj, p.template)
		}
	}
	pass := func(ps []*Policy, fill bool) {
		m := newMerger(st, in.Kind, fill)
		for _, p := range ps {
			if st.stopped() {
				return
			}
			var before any
			if in.Explain {
				before = deepCopy(obj)
			}
			m.mergeMap(obj, p.patchFor(in.Kind))
			if in.Explain {
				res.Changes = append(res.Changes, Change{Policy: p, Fields: diffPaths(before, obj)})
			}
		}
	}
	// Defaults sit below the object: fill, highest precedence first, so the first to set a field wins.
	pass(reversed(l.namespaceDefault), true)
	pass(reversed(l.platformDefault), true)
	pass(l.platformMerge, false)
	pass(l.namespaceMerge, false)
	pass(l.enforce, false)

	if st.stopped() {
		return Result{Object: in.Object, Recognised: true, Identity: id}, fmt.Errorf("%s not patched: %w", strings.ToLower(string(in.Kind)), st.err)
	}
	refs := make([]string, len(res.Applied))
	for i, p := range res.Applied {
		refs[i] = p.Ref
	}
	setAnnotation(t, obj, AppliedAnnotation, strings.Join(refs, ","))
	if in.Explain {
		res.Changes = orderChanges(res.Changes, res.Applied)
	}
	var err error
	if res.Patch, err = jsonPatch(t, json.RawMessage(in.Object), obj); err != nil {
		return res, fmt.Errorf("diff %s: %w", strings.ToLower(string(in.Kind)), err)
	}
	res.Changed = true
	if in.PatchOnly {
		return res, nil
	}
	if res.Object, err = encodeJSON(obj); err != nil {
		return res, fmt.Errorf("encode %s: %w", strings.ToLower(string(in.Kind)), err)
	}
	return res, nil
}

// patchFor returns the part of the policy that applies to a kind.
func (p *Policy) patchFor(k Kind) map[string]any {
	if k == KindService {
		return p.service
	}
	return p.template
}

func reversed(ps []*Policy) []*Policy {
	out := make([]*Policy, len(ps))
	for i, p := range ps {
		out[len(ps)-1-i] = p
	}
	return out
}

// orderChanges puts explanations in provenance order (defaults were applied in reverse).
func orderChanges(cs []Change, applied []*Policy) []Change {
	by := make(map[*Policy]Change, len(cs))
	for _, c := range cs {
		by[c.Policy] = c
	}
	out := make([]Change, len(applied))
	for i, p := range applied {
		out[i] = by[p]
	}
	return out
}

func setAnnotation(t *tree, obj map[string]any, key, value string) {
	meta, ok := t.getMap(obj, "metadata")
	if !ok {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	ann, ok := t.getMap(meta, "annotations")
	if !ok {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[key] = value
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
