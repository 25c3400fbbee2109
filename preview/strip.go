package preview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// strip takes out of a live object what the base policies of the changed ConfigMaps put in
// it, so that the preview patches the object as its manager will create it again, not the
// object those policies already shaped: a `default` policy changing 1Gi to 2Gi fills nothing
// in a Pod that has 1Gi from it.
//
// A policy's part is found by applying it alone to a skeleton of the object (its metadata,
// only the labels that recognise it, and its containers' names and images; all its labels if
// the policy's selector needs them) and taking out of the object every field where the object
// still has the value the policy gives. What cannot be told apart stays: a value the user
// wrote that equals the policy's is taken out too (the preview then shows the new policy's
// value), and what a policy removed cannot be put back.
//
// overridden are the paths of the values a merge or enforce policy set, which may have
// replaced a value of the object's own: what the manager writes there is unknown.
func (p *Previewer) strip(in policies.Input, admitted []*policies.Policy) (stripped []byte, overridden []Field, err error) {
	// As the API server returns it, the object is in its encoding already.
	var live any
	d := json.NewDecoder(bytes.NewReader(in.Object))
	d.UseNumber()
	if err := d.Decode(&live); err != nil {
		return nil, nil, fmt.Errorf("decode: %w", err)
	}
	obj, ok := live.(map[string]any)
	if !ok {
		return in.Object, nil, nil
	}
	for i := len(admitted) - 1; i >= 0; i-- { // undone in the reverse order of the layers
		q := admitted[i]
		skel, part, err := p.partOf(q, in, obj)
		if err != nil {
			return nil, nil, err
		}
		if part == nil {
			continue
		}
		taken := func(string, any) {}
		if q.Mode != policies.ModeDefault && p.Changed[q.Namespace+"/"+q.ConfigMap] { // a default fills only what the object left unset; an unchanged policy sets it again
			taken = func(path string, v any) { overridden = append(overridden, Field{Path: path, Old: v}) }
		}
		stripTree(obj, skel, part, "", taken)
	}
	stripped, err = json.Marshal(obj)
	return stripped, overridden, err
}

// partOf applies one policy alone to a skeleton of the object and returns both, in the API
// server's encoding; nil when the policy does not apply to the skeleton.
func (p *Previewer) partOf(q *policies.Policy, in policies.Input, obj map[string]any) (skel, part map[string]any, err error) {
	if p.alone == nil {
		p.alone = map[*policies.Policy]*policies.Set{}
		p.reserved = map[string]bool{}
		for _, l := range policies.ReservedLabels() {
			p.reserved[l] = true
		}
	}
	set := p.alone[q]
	if set == nil {
		set = policies.NewSet([]*policies.Policy{q})
		p.alone[q] = set
	}
	sidecars, err := p.sidecarsOf(q, set, in, obj)
	if err != nil {
		return nil, nil, err
	}
	for _, allLabels := range []bool{false, true} {
		s := skeleton(in.Kind, obj, p.reserved, allLabels, sidecars)
		// Pods of one group have one skeleton but for their names: a policy's part in them
		// is computed once (policies do not match on names).
		key, err := skeletonKey(q, in.Namespace, s)
		if err != nil {
			return nil, nil, err
		}
		if part, ok := p.parts[key]; ok {
			if part.skel == nil {
				continue
			}
			return part.skel, part.part, nil
		}
		if in.Object, err = json.Marshal(s); err != nil {
			return nil, nil, err
		}
		res, err := set.Apply(in)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(res.Applied, q) {
			p.remember(key, nil, nil)
			continue
		}
		sc, err := objdiff.Canonical(string(in.Kind), in.Object)
		if err != nil {
			return nil, nil, err
		}
		rc, err := objdiff.Canonical(string(in.Kind), res.Object)
		if err != nil {
			return nil, nil, err
		}
		skel, _ = sc.(map[string]any)
		part, _ = rc.(map[string]any)
		p.remember(key, skel, part)
		return skel, part, nil
	}
	return nil, nil, nil
}

// policyPart is a policy's part in a skeleton: the skeleton and the skeleton with the policy
// applied (nil: the policy does not apply to it).
type policyPart struct{ skel, part map[string]any }

// MaxParts bounds the memory of policies' parts a Previewer keeps; when full it starts over.
const MaxParts = 4096

func (p *Previewer) remember(key string, skel, part map[string]any) {
	if p.parts == nil || len(p.parts) >= MaxParts {
		p.parts = map[string]policyPart{}
	}
	p.parts[key] = policyPart{skel: skel, part: part}
}

// skeletonKey identifies a policy's part in a skeleton: the policy, the namespace, and the
// skeleton without what names the one object (name, generateName, uid, owners).
func skeletonKey(q *policies.Policy, namespace string, s map[string]any) (string, error) {
	meta := s["metadata"].(map[string]any)
	anon := make(map[string]any, len(meta))
	for k, v := range meta {
		switch k {
		case "name", "generateName", "uid", "ownerReferences":
		default:
			anon[k] = v
		}
	}
	b, err := json.Marshal(map[string]any{"m": anon, "s": s["spec"], "k": s["kind"]})
	return fmt.Sprintf("%p\x00%s\x00%s", q, namespace, b), err
}

// sidecarsOf are the names of the containers a policy adds whole (platform sidecars): the
// containers it gives a skeleton without any. They are left out of the skeleton, so that the
// object's copy of each is taken out whole. Known once per policy.
func (p *Previewer) sidecarsOf(q *policies.Policy, set *policies.Set, in policies.Input, obj map[string]any) (map[string]bool, error) {
	if names, ok := p.sidecars[q]; ok || in.Kind != profiles.KindPod {
		return names, nil
	}
	var err error
	if in.Object, err = json.Marshal(skeleton(in.Kind, obj, nil, true, nil, true)); err != nil {
		return nil, err
	}
	res, err := set.Apply(in)
	if err != nil || !slices.Contains(res.Applied, q) {
		return nil, err // not known from this object
	}
	var pod struct {
		Spec struct {
			Containers, InitContainers []struct{ Name string }
		}
	}
	if err := json.Unmarshal(res.Object, &pod); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, c := range append(pod.Spec.Containers, pod.Spec.InitContainers...) {
		names[c.Name] = true
	}
	if p.sidecars == nil {
		p.sidecars = map[*policies.Policy]map[string]bool{}
	}
	p.sidecars[q] = names
	return names, nil
}

// skeleton is the least of an object a policy needs to match it: its identity, labels (only
// the reserved ones unless allLabels), owners, and the names and images of its containers (a
// Service: its selector and ports).
func skeleton(kind profiles.Kind, obj map[string]any, reserved map[string]bool, allLabels bool, sidecars map[string]bool, noContainers ...bool) map[string]any {
	meta, _ := obj["metadata"].(map[string]any)
	m := map[string]any{}
	for _, k := range []string{"name", "generateName", "namespace", "uid", "ownerReferences"} {
		if v, ok := meta[k]; ok {
			m[k] = v
		}
	}
	if labels, ok := meta["labels"].(map[string]any); ok {
		keep := map[string]any{}
		for k, v := range labels {
			if allLabels || reserved[k] {
				keep[k] = v
			}
		}
		m["labels"] = keep
	}
	spec, _ := obj["spec"].(map[string]any)
	s := map[string]any{}
	if kind == profiles.KindService {
		for _, k := range []string{"selector", "ports"} {
			if v, ok := spec[k]; ok {
				s[k] = v
			}
		}
	} else {
		for _, k := range []string{"containers", "initContainers"} {
			list, _ := spec[k].([]any)
			var out []any
			for _, it := range list {
				c, _ := it.(map[string]any)
				if name, _ := c["name"].(string); !sidecars[name] && len(noContainers) == 0 {
					out = append(out, map[string]any{"name": c["name"], "image": c["image"]})
				}
			}
			if out != nil || len(noContainers) > 0 {
				s[k] = out
			}
		}
	}
	return map[string]any{"apiVersion": obj["apiVersion"], "kind": string(kind), "metadata": m, "spec": s}
}

// stripTree takes out of obj every value a policy set: where part (the skeleton with the
// policy applied) differs from skel and obj still holds part's value. Items of lists of named
// objects are followed by name; an item the policy added (a sidecar) is taken out whole.
func stripTree(obj, skel, part map[string]any, path string, taken func(string, any)) {
	for k, pv := range part {
		at := k
		if path != "" {
			at = path + "." + k
		}
		ov, ok := obj[k]
		if !ok {
			continue
		}
		sv, inSkel := skel[k]
		if inSkel && same(sv, pv) {
			continue // the policy left it as it was
		}
		switch pt := pv.(type) {
		case map[string]any:
			om, ok := ov.(map[string]any)
			if !ok {
				continue
			}
			sm, _ := sv.(map[string]any)
			stripTree(om, sm, pt, at, taken)
			if len(om) == 0 {
				delete(obj, k)
			}
		case []any:
			ol, _ := ov.([]any)
			pn, on := objdiff.ItemsByName(pt), objdiff.ItemsByName(ol)
			if pn == nil || on == nil {
				sl, _ := sv.([]any)
				if kept := withoutAdded(ol, sl, pt); len(kept) == 0 {
					delete(obj, k)
				} else {
					obj[k] = kept
				}
				continue
			}
			sl, _ := sv.([]any)
			sn := objdiff.ItemsByName(sl)
			kept := ol[:0:0]
			for _, it := range ol {
				item := it.(map[string]any) // ItemsByName: every item is a named object
				name := item["name"].(string)
				pi, set := pn[name].(map[string]any)
				if !set {
					kept = append(kept, it)
					continue
				}
				si, inSkel := sn[name].(map[string]any)
				if !inSkel {
					continue // the policy added it
				}
				stripTree(item, si, pi, at+"["+name+"]", taken)
				kept = append(kept, item)
			}
			if len(kept) == 0 {
				delete(obj, k)
			} else {
				obj[k] = kept
			}
		default:
			if same(ov, pv) {
				delete(obj, k)
				taken(at, pv)
			}
		}
	}
}

// withoutAdded is a list of the object without the items the policy added to the skeleton's
// (part's items the skeleton has not): tolerations, topology spread constraints, … Each added
// item takes out one equal item of the object.
func withoutAdded(obj, skel, part []any) []any {
	var addedItems []any
	for _, it := range part {
		if i := slices.IndexFunc(skel, func(s any) bool { return same(s, it) }); i >= 0 {
			skel = slices.Delete(slices.Clone(skel), i, i+1)
			continue
		}
		addedItems = append(addedItems, it)
	}
	kept := make([]any, 0, len(obj))
	for _, it := range obj {
		if i := slices.IndexFunc(addedItems, func(a any) bool { return same(a, it) }); i >= 0 {
			addedItems = slices.Delete(addedItems, i, i+1)
			continue
		}
		kept = append(kept, it)
	}
	return kept
}

// same compares two values as the audit does.
func same(a, b any) bool { return len(objdiff.Changes(a, b, objdiff.AsStored)) == 0 }
