// Package objdiff compares two objects as generic JSON trees and names where they differ, in
// the one path form every part of podpatch shows (`render --explain`, `podpatch explain`,
// `audit`, `diff`): object keys joined by dots, items of lists of named objects by [name],
// other lists whole. paths.go is the diff (the engine's explanation uses it with its zero
// Options); stored.go compares two objects as the API server stores them (the audit's and
// `diff`'s comparison, reference §7 and §10).
//
// It sits below the engine and knows nothing of policies: the engine's explanation and the
// tools' comparison must name a field the same way (the audit gives each differing field to
// the policy whose explained change names it), so both take their paths from here.
package objdiff

import (
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Options are the choices of Paths and Changes. The zero value is `render --explain`'s diff;
// the audit (reference §7) sets all three (AsStored), to compare a live object with the one the
// policies produce.
type Options struct {
	// ByValue compares numbers by value, and resource quantities (members of limits, requests
	// and overhead, sizeLimit) by value: the API server stores `1000m` as `1`. Otherwise
	// scalars compare exactly.
	ByValue bool
	// DescendMissing records an object only one side has by its members (a policy adding an
	// annotation to an object without annotations changes metadata.annotations.<key>), not
	// as a whole.
	DescendMissing bool
	// ListItems compares lists that are not lists of named objects item by item, by these
	// same rules, recording the list whole when their lengths or an item differ. Otherwise
	// such lists compare exactly.
	ListItems bool
}

// AsStored are the Options that compare values as the API server stores them: the audit's and
// `podpatch diff`'s.
var AsStored = Options{ByValue: true, DescendMissing: true, ListItems: true}

// Paths lists, sorted, the paths at which two generic JSON trees differ: object keys joined
// by dots; items of lists of named objects (containers, env, volumes: every item an object
// with a distinct string name) by [name]; other lists, and anything else, as a whole.
func Paths(before, after any, o Options) []string {
	var out []string
	for _, c := range Changes(before, after, o) {
		out = append(out, c.Path)
	}
	return out
}

// Change is one path at which two trees differ (as Paths names it) and the value each has
// there; nil where that side has none.
type Change struct {
	Path          string
	Before, After any
}

// Changes is Paths with the values on both sides, sorted by path: what `podpatch diff` shows as
// old → new (reference §10), from the one path diff the audit and `render --explain` use.
func Changes(before, after any, o Options) []Change {
	d := pathDiff{o: o}
	d.into(before, after, "", "")
	sort.Slice(d.out, func(i, j int) bool { return d.out[i].Path < d.out[j].Path })
	return d.out
}

type pathDiff struct {
	o   Options
	out []Change
}

func (d *pathDiff) into(a, b any, path, key string) {
	if d.differs(a, b, path, key) {
		d.out = append(d.out, Change{Path: path, Before: a, After: b})
	}
}

// differs compares a and b at path (key is the last object key on the way); for objects and
// lists of named objects it records the differing paths inside them and returns false,
// otherwise it says whether the values differ.
func (d *pathDiff) differs(a, b any, path, key string) bool {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		for k, av := range am {
			bv, ok := bm[k]
			if !ok {
				d.missing(av, nil, joinPath(path, k), memberKey(key, k))
				continue
			}
			d.into(av, bv, joinPath(path, k), memberKey(key, k))
		}
		for k, bv := range bm {
			if _, ok := am[k]; !ok {
				d.missing(nil, bv, joinPath(path, k), memberKey(key, k))
			}
		}
		return false
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok {
		an, bn := ItemsByName(al), ItemsByName(bl)
		if an == nil || bn == nil {
			if !d.o.ListItems {
				return !reflect.DeepEqual(a, b)
			}
			if len(al) != len(bl) {
				return true
			}
			n := len(d.out)
			for i := range al {
				d.into(al[i], bl[i], path, key)
				if len(d.out) > n { // an item differs: the list is recorded whole, not its paths
					d.out = d.out[:n]
					return true
				}
			}
			return false
		}
		for name, av := range an {
			if bv, ok := bn[name]; ok {
				d.into(av, bv, path+"["+name+"]", key)
			} else {
				d.out = append(d.out, Change{Path: path + "[" + name + "]", Before: av})
			}
		}
		for name, bv := range bn {
			if _, ok := an[name]; !ok {
				d.out = append(d.out, Change{Path: path + "[" + name + "]", After: bv})
			}
		}
		return false
	}
	if !d.o.ByValue {
		return !reflect.DeepEqual(a, b)
	}
	if aok || bok || am != nil || bm != nil {
		return true // an object or list against something else
	}
	return !sameScalar(a, b, key)
}

// missing records a value only one side has (the other is nil).
func (d *pathDiff) missing(a, b any, path, key string) {
	v, empty := a, map[string]any{}
	if v == nil {
		v = b
	}
	if m, ok := v.(map[string]any); ok && len(m) > 0 && d.o.DescendMissing {
		if a == nil {
			d.into(empty, m, path, key)
		} else {
			d.into(m, empty, path, key)
		}
		return
	}
	d.out = append(d.out, Change{Path: path, Before: a, After: b})
}

// memberKey is the key differs is given for member k of the object found at key: members of
// quantity maps (resources.limits, …) are keyed by resource name, so they get quantityKey.
func memberKey(key, k string) string {
	if diffQuantityMaps[key] {
		return quantityKey
	}
	return k
}

// diffQuantityMaps hold resource quantities by resource name; diffQuantityFields are quantities
// themselves (the engine's quantity fields, policies/parse.go's quantityFields, split).
var (
	diffQuantityMaps   = map[string]bool{"limits": true, "requests": true, "overhead": true}
	diffQuantityFields = map[string]bool{"sizeLimit": true}
)

// quantityKey stands for the key of a member of one of diffQuantityMaps (see memberKey).
const quantityKey = "\x00quantity"

// sameScalar compares two scalars; quantities by value, numbers by value.
func sameScalar(a, b any, key string) bool {
	if a == b {
		return true
	}
	if diffQuantityFields[key] || key == quantityKey {
		qa, errA := diffQuantity(a)
		qb, errB := diffQuantity(b)
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

func diffQuantity(v any) (resource.Quantity, error) {
	switch t := v.(type) {
	case string:
		return resource.ParseQuantity(t)
	case json.Number:
		return resource.ParseQuantity(t.String())
	}
	return resource.Quantity{}, errNotQuantity
}

var errNotQuantity = errors.New("not a quantity")

// ItemsByName indexes a list of named objects (containers, env, volumes: every item an object
// with a distinct string name) by name; nil for any other list, and for an empty one.
func ItemsByName(l []any) map[string]any {
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

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
