package policies

import (
	"slices"
	"strings"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/policies/profiles"
)

// diffPaths lists the paths at which two JSON trees differ, for `render --explain`: leaves of
// objects, lists of named objects by item name, other lists as a whole, values compared
// exactly (objdiff.Paths with its zero options, the path form the audit and `diff` use too).
func diffPaths(before, after any) []string {
	return objdiff.Paths(before, after, objdiff.Options{})
}

// Paths lists the fields a policy writes (sets or removes) on objects of a kind, in `render
// --explain`'s form, whatever an object already holds: what `podpatch explain` shows of a live
// object whose fields the policy set at admission. Named items are named as the policy names
// them (`spec.containers[@main]`, `[*]`); other lists are named whole.
func (p *Policy) Paths(k profiles.Kind) []string {
	patch := p.Patch(k)
	if len(patch) == 0 {
		return nil
	}
	return objdiff.Paths(skeleton(patch), patch, objdiff.Options{DescendMissing: true})
}

// skeleton is a patch without its values: its objects, and its lists of named objects with
// only their names, so that objdiff.Paths of it and the patch names every leaf the patch writes.
func skeleton(v map[string]any) map[string]any {
	out := map[string]any{}
	for k, m := range v {
		switch m := m.(type) {
		case map[string]any:
			if len(m) > 0 { // an empty object is a value the patch writes (emptyDir: {})
				out[k] = skeleton(m)
			}
		case []any:
			if objdiff.ItemsByName(m) == nil {
				continue // a list written whole
			}
			var items []any
			for _, it := range m {
				if it := it.(map[string]any); len(it) > 1 { // a name alone is an item written whole
					s := skeleton(it)
					s["name"] = it["name"]
					items = append(items, s)
				}
			}
			out[k] = items
		}
	}
	return out
}

// dropRestored takes out of the explanations the placement fields that kueue.Keep put
// back: a field a policy changed on its way that the patched object no longer differs in.
func dropRestored(changes []Change, given []byte, obj map[string]any) []Change {
	in := jsontree.ExpandAll(jsontree.New().Decode(given))
	final := diffPaths(in, jsontree.ExpandAll(deepCopy(obj)))
	differs := func(f string) bool {
		for _, d := range final {
			if d == f || strings.HasPrefix(d, f+".") || strings.HasPrefix(d, f+"[") ||
				strings.HasPrefix(f, d+".") || strings.HasPrefix(f, d+"[") {
				return true
			}
		}
		return false
	}
	for i, c := range changes {
		changes[i].Fields = slices.DeleteFunc(slices.Clone(c.Fields), func(f string) bool {
			placementPath := strings.HasPrefix(f, "spec.nodeSelector") || strings.HasPrefix(f, "spec.tolerations") ||
				strings.HasPrefix(f, "spec.affinity")
			return placementPath && !differs(f)
		})
	}
	return changes
}

func reversed(ps []*Policy) []*Policy {
	out := make([]*Policy, len(ps))
	for i, p := range ps {
		out[len(ps)-1-i] = p
	}
	return out
}

// orderChanges puts explanations in provenance order (defaults were applied in reverse), one
// per policy (the layers may have applied twice: applyLayers).
func orderChanges(cs []Change, applied []*Policy) []Change {
	by := make(map[*Policy]Change, len(cs))
	for _, c := range cs {
		if prev, ok := by[c.Policy]; ok {
			for _, f := range c.Fields {
				if !slices.Contains(prev.Fields, f) {
					prev.Fields = append(prev.Fields, f)
				}
			}
			c = prev
		}
		by[c.Policy] = c
	}
	out := make([]Change, len(applied))
	for i, p := range applied {
		out[i] = by[p]
	}
	return out
}
