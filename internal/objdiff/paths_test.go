package objdiff

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPathsByValue: the audit's options (AsStored) compare quantities and numbers by value, descend
// into objects only one side has and compare unnamed lists item by item; explain's do none of
// that.
func TestPathsByValue(t *testing.T) {
	num := func(s string) json.Number { return json.Number(s) }
	before := map[string]any{
		"resources": map[string]any{"limits": map[string]any{"cpu": "1000m", "memory": "1Gi"}},
		"replicas":  num("1"),
		"args":      []any{"a", num("2")},
	}
	after := map[string]any{
		"resources": map[string]any{"limits": map[string]any{"cpu": "1", "memory": "1024Mi"}},
		"replicas":  num("1.0"),
		"args":      []any{"a", num("2.0")},
		"metadata":  map[string]any{"annotations": map[string]any{"x": "y"}},
	}
	require.Equal(t, []string{"metadata.annotations.x"}, Paths(before, after, AsStored))
	require.Equal(t, []string{"args", "metadata", "replicas", "resources.limits.cpu", "resources.limits.memory"},
		Paths(before, after, Options{}))
}

// TestPathsAgreesWithFormerDiffs: on generated trees, Paths with explain's options gives what
// the engine's own diff (policies/changes.go) gave, and with the audit's what audit/diff.go's gave (both kept
// below as they were), so that neither `render --explain` nor the audit changes.
func TestPathsAgreesWithFormerDiffs(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 5))
	differ := 0
	for range 20000 {
		a := genDiffTree(rng, 3, "")
		b := genDiffTree(rng, 3, "")
		if rng.IntN(2) == 0 { // often close: b a mutated copy of a
			b = mutateDiffTree(rng, deepCopy(a), "")
		}
		got := Paths(a, b, Options{})
		require.Equal(t, formerExplainDiff(a, b), got, "explain: %#v / %#v", a, b)
		require.Equal(t, formerAuditDiff(a, b), Paths(a, b, AsStored), "audit: %#v / %#v", a, b)
		if len(got) > 0 {
			differ++
		}
	}
	require.Greater(t, differ, 1000)
}

var diffKeys = []string{"name", "a", "b", "limits", "requests", "cpu", "sizeLimit", "containers"}

func genDiffScalar(rng *rand.Rand) any {
	switch rng.IntN(7) {
	case 0:
		return json.Number([]string{"1", "1.0", "1000", "2", "1e3"}[rng.IntN(5)])
	case 1:
		return []string{"1", "1000m", "1Gi", "1024Mi", "x", ""}[rng.IntN(6)]
	case 2:
		return rng.IntN(2) == 0
	case 3:
		return nil
	default:
		return []string{"p", "q", "r"}[rng.IntN(3)]
	}
}

func genDiffTree(rng *rand.Rand, depth int, key string) any {
	if depth == 0 {
		return genDiffScalar(rng)
	}
	switch rng.IntN(4) {
	case 0:
		return genDiffScalar(rng)
	case 1: // a list, often of named objects
		n := rng.IntN(4)
		l := make([]any, n)
		for i := range l {
			if rng.IntN(3) > 0 {
				m := genDiffTree(rng, depth-1, key)
				if mm, ok := m.(map[string]any); ok {
					mm["name"] = []string{"x", "y", "z", "w"}[rng.IntN(4)]
				}
				l[i] = m
			} else {
				l[i] = genDiffTree(rng, depth-1, key)
			}
		}
		return l
	default:
		m := map[string]any{}
		for range rng.IntN(4) {
			k := diffKeys[rng.IntN(len(diffKeys))]
			m[k] = genDiffTree(rng, depth-1, k)
		}
		return m
	}
}

func mutateDiffTree(rng *rand.Rand, v any, key string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			switch rng.IntN(6) {
			case 0:
				delete(t, k)
			case 1:
				t[k] = genDiffTree(rng, 2, k)
			default:
				t[k] = mutateDiffTree(rng, x, k)
			}
		}
		if rng.IntN(4) == 0 {
			k := diffKeys[rng.IntN(len(diffKeys))]
			t[k] = genDiffTree(rng, 2, k)
		}
		return t
	case []any:
		if rng.IntN(5) == 0 && len(t) > 1 {
			t[0], t[1] = t[1], t[0]
		}
		for i := range t {
			if rng.IntN(3) == 0 {
				t[i] = mutateDiffTree(rng, t[i], key)
			}
		}
		return t
	default:
		if rng.IntN(3) == 0 {
			return genDiffScalar(rng)
		}
		return v
	}
}

// formerExplainDiff is the engine's diff (policies/changes.go) before the shared one, kept as the oracle.
func formerExplainDiff(before, after any) []string {
	var out []string
	var into func(a, b any, path string)
	into = func(a, b any, path string) {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			for k, av := range am {
				bv, ok := bm[k]
				if !ok {
					out = append(out, joinPath(path, k))
					continue
				}
				into(av, bv, joinPath(path, k))
			}
			for k := range bm {
				if _, ok := am[k]; !ok {
					out = append(out, joinPath(path, k))
				}
			}
			return
		}
		al, aok := a.([]any)
		bl, bok := b.([]any)
		if aok && bok && formerNamedItems(al) && formerNamedItems(bl) {
			an, bn := ItemsByName(al), ItemsByName(bl)
			for name, av := range an {
				if bv, ok := bn[name]; ok {
					into(av, bv, path+"["+name+"]")
				} else {
					out = append(out, path+"["+name+"]")
				}
			}
			for name := range bn {
				if _, ok := an[name]; !ok {
					out = append(out, path+"["+name+"]")
				}
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			out = append(out, path)
		}
	}
	into(before, after, "")
	sort.Strings(out)
	return out
}

func formerNamedItems(l []any) bool {
	seen := make(map[string]bool, len(l))
	for _, it := range l {
		m, ok := it.(map[string]any)
		if !ok {
			return false
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return false
		}
		seen[n] = true
	}
	return len(l) > 0
}

// formerAuditDiff is audit/diff.go's fieldDiff before the shared one, kept as the oracle.
func formerAuditDiff(live, want any) []string {
	var out []string
	var into func(a, b any, path, key string, out *[]string)
	var differs func(a, b any, key, path string, out *[]string) bool
	missing := func(v any, path, key string, out *[]string) {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			into(map[string]any{}, m, path, key, out)
			return
		}
		*out = append(*out, path)
	}
	into = func(a, b any, path, key string, out *[]string) {
		if differs(a, b, key, path, out) {
			*out = append(*out, path)
		}
	}
	differs = func(a, b any, key, path string, out *[]string) bool {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			for k, av := range am {
				bv, ok := bm[k]
				if !ok {
					missing(av, joinPath(path, k), memberKey(key, k), out)
					continue
				}
				into(av, bv, joinPath(path, k), memberKey(key, k), out)
			}
			for k, bv := range bm {
				if _, ok := am[k]; !ok {
					missing(bv, joinPath(path, k), memberKey(key, k), out)
				}
			}
			return false
		}
		al, aok := a.([]any)
		bl, bok := b.([]any)
		if aok && bok {
			an, bn := ItemsByName(al), ItemsByName(bl)
			if an == nil || bn == nil {
				if len(al) != len(bl) {
					return true
				}
				for i := range al {
					var inner []string
					into(al[i], bl[i], path, key, &inner)
					if len(inner) > 0 {
						return true
					}
				}
				return false
			}
			for name, av := range an {
				if bv, ok := bn[name]; ok {
					into(av, bv, path+"["+name+"]", key, out)
				} else {
					*out = append(*out, path+"["+name+"]")
				}
			}
			for name := range bn {
				if _, ok := an[name]; !ok {
					*out = append(*out, path+"["+name+"]")
				}
			}
			return false
		}
		if aok || bok || am != nil || bm != nil {
			return true
		}
		return !sameScalar(a, b, key)
	}
	into(live, want, "", "", &out)
	sort.Strings(out)
	return out
}

// TestChangesValues: Changes names the paths Paths names, with the value each side has there
// (nil for a side without it), members of objects only one side has included.
func TestChangesValues(t *testing.T) {
	before := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "1", "gone": "x"}},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "main", "resources": map[string]any{"limits": map[string]any{"memory": "1Gi"}}},
			map[string]any{"name": "old-sidecar"},
		}},
	}
	after := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"a": "2"}, "annotations": map[string]any{"n": "v"}},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "main", "resources": map[string]any{"limits": map[string]any{"memory": "1024Mi"}}},
		}, "tolerations": []any{map[string]any{"key": "k"}}},
	}
	o := AsStored
	got := Changes(before, after, o)
	require.Equal(t, []Change{
		{Path: "metadata.annotations.n", After: "v"},
		{Path: "metadata.labels.a", Before: "1", After: "2"},
		{Path: "metadata.labels.gone", Before: "x"},
		{Path: "spec.containers[old-sidecar]", Before: map[string]any{"name": "old-sidecar"}},
		{Path: "spec.tolerations", After: []any{map[string]any{"key": "k"}}},
	}, got, "1Gi is 1024Mi")
	var paths []string
	for _, c := range got {
		paths = append(paths, c.Path)
	}
	require.Equal(t, Paths(before, after, o), paths)
	// Swapped sides swap the values.
	for i, c := range Changes(after, before, o) {
		require.Equal(t, got[i].Before, c.After, c.Path)
		require.Equal(t, got[i].After, c.Before, c.Path)
	}
}

// deepCopy copies a JSON tree as it is.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}
