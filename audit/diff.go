package audit

import (
	"encoding/json"
	"errors"
	"math/big"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
)

// fieldDiff lists the paths at which the live object and the one the policies produce
// differ, in the form of `render --explain`: object keys joined by dots, items of lists of
// named objects (containers, env, volumes) by [name], other lists as a whole.
//
// Resource quantities compare by value (the API server stores `1000m` as `1`), numbers too;
// Check gives both objects the API server's encoding first (canonical).
func fieldDiff(live, want any) []string {
	var out []string
	diffInto(live, want, "", "", &out)
	sort.Strings(out)
	return out
}

func diffInto(a, b any, path, key string, out *[]string) {
	if !differs(a, b, key, path, out) {
		return
	}
	*out = append(*out, path)
}

// differs compares a and b at path (key is the last object key on the way); for objects and
// lists of named objects it records the differing paths inside them and returns false,
// otherwise it says whether the values differ.
func differs(a, b any, key, path string, out *[]string) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			bv, ok := bm[k]
			if !ok {
				missing(av, join(path, k), memberKey(key, k), out)
				continue
			}
			diffInto(av, bv, join(path, k), memberKey(key, k), out)
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok {
				missing(bv, join(path, k), memberKey(key, k), out)
			}
		}
		return false
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		an, bn := byName(al), byName(bl)
		if an == nil || bn == nil {
			if len(al) != len(bl) {
				return true
			}
			for i := range al {
				var inner []string
				diffInto(al[i], bl[i], path, key, &inner)
				if len(inner) > 0 {
					return true
				}
			}
			return false
		}
		for name, av := range an {
			if bv, ok := bn[name]; ok {
				diffInto(av, bv, path+"["+name+"]", key, out)
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
		return true // an object or list against something else
	}
	return !sameScalar(a, b, key)
}

// missing records a value only one side has: an object by its members (a policy adding an
// annotation to an object without annotations changes metadata.annotations.<key>), anything
// else whole.
func missing(v any, path, key string, out *[]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		diffInto(map[string]any{}, m, path, key, out)
		return
	}
	*out = append(*out, path)
}

// memberKey is the key differs is given for member k of the object found at key: members of
// quantity maps (resources.limits, …) are keyed by resource name, so they get quantityKey.
func memberKey(key, k string) string {
	if quantityMaps[key] {
		return quantityKey
	}
	return k
}

// quantityMaps hold resource quantities by resource name; quantityFields are quantities themselves.
var (
	quantityMaps   = map[string]bool{"limits": true, "requests": true, "overhead": true}
	quantityFields = map[string]bool{"sizeLimit": true}
)

// sameScalar compares two scalars; quantities by value, numbers by value.
func sameScalar(a, b any, key string) bool {
	if a == b {
		return true
	}
	if quantityFields[key] || key == quantityKey {
		qa, errA := quantity(a)
		qb, errB := quantity(b)
		if errA == nil && errB == nil {
			return qa.Cmp(qb) == 0
		}
	}
	na, aok := a.(json.Number)
	nb, bok := b.(json.Number)
	if aok && bok {
		fa, okA := new(big.Float).SetString(na.String())
		fb, okB := new(big.Float).SetString(nb.String())
		return okA && okB && fa.Cmp(fb) == 0
	}
	return false
}

// quantityKey stands for the key of a member of one of quantityMaps (see memberKey).
const quantityKey = "\x00quantity"

func quantity(v any) (resource.Quantity, error) {
	switch t := v.(type) {
	case string:
		return resource.ParseQuantity(t)
	case json.Number:
		return resource.ParseQuantity(t.String())
	}
	return resource.Quantity{}, errNotQuantity
}

var errNotQuantity = errors.New("not a quantity")

// byName indexes a list whose items are all objects with distinct string names; nil otherwise.
func byName(l []any) map[string]any {
	if len(l) == 0 {
		return nil
	}
	m := make(map[string]any, len(l))
	for _, it := range l {
		o, ok := it.(map[string]any)
		if !ok {
			return nil
		}
		n, ok := o["name"].(string)
		if _, dup := m[n]; !ok || dup {
			return nil
		}
		m[n] = o
	}
	return m
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
