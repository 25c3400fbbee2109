package policies

import (
	"reflect"
	"sort"
)

// diffPaths lists the paths at which two JSON trees differ: leaves of objects, container-like
// lists by item name, other lists as a whole.
func diffPaths(before, after any) []string {
	var out []string
	diffInto(before, after, "", &out)
	sort.Strings(out)
	return out
}

func diffInto(a, b any, path string, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			bv, ok := bm[k]
			if !ok {
				*out = append(*out, join(path, k))
				continue
			}
			diffInto(av, bv, join(path, k), out)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				*out = append(*out, join(path, k))
			}
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && namedItems(al) && namedItems(bl) {
		byName := func(l []any) map[string]any {
			m := make(map[string]any, len(l))
			for _, it := range l {
				m[it.(map[string]any)["name"].(string)] = it
			}
			return m
		}
		an, bn := byName(al), byName(bl)
		for name, av := range an {
			if bv, ok := bn[name]; ok {
				diffInto(av, bv, path+"["+name+"]", out)
			} else {
				*out = append(*out, path+"["+name+"]")
			}
		}
		for name := range bn {
			if _, ok := an[name]; !ok {
				*out = append(*out, path+"["+name+"]")
			}
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, path)
	}
}

// namedItems reports whether every item of a list is an object with a unique string name.
func namedItems(l []any) bool {
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

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
