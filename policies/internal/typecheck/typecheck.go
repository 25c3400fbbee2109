// Package typecheck finds every value of a policy document that its typed decode would refuse,
// before it runs: a typed decode stops at the first value of the wrong type or the first bad
// quantity and names no list index or map key, so one mistake would hide every other problem
// of a policy (reference §4: lint reports every error). Each bad value is reported at its field
// path and taken out of the tree, so that the decode that follows succeeds and validation can
// report the rest.
package typecheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	quantityType    = reflect.TypeFor[resource.Quantity]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// Types reports every value of v that cannot decode into t, walking the generic tree next to
// the Go type, and removes it from v. Unknown fields are left for the strict decode to report;
// nulls are left for the caller.
func Types(v any, t reflect.Type, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	var walk func(v any, t reflect.Type, fld *field.Path) bool
	walk = func(v any, t reflect.Type, fld *field.Path) bool {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if v == nil {
			return true
		}
		ok := true
		switch {
		case t == quantityType:
			ok = isString(v) || isNumber(v)
		case t == intOrStringType:
			ok = isString(v) || isInteger(v, 32)
		case reflect.PointerTo(t).Implements(unmarshalerType):
			// Decoded by its own rules (times, …): the typed decode reports it.
		default:
			switch t.Kind() {
			case reflect.Struct:
				m, isMap := v.(map[string]any)
				if ok = isMap; ok {
					for _, k := range sortedKeys(m) {
						if ft, known := jsonField(t, k); known && !walk(m[k], ft, fld.Child(k)) {
							delete(m, k)
						}
					}
				}
			case reflect.Map:
				m, isMap := v.(map[string]any)
				if ok = isMap; ok {
					for _, k := range sortedKeys(m) {
						if !walk(m[k], t.Elem(), fld.Key(k)) {
							delete(m, k)
						}
					}
				}
			case reflect.Slice:
				if t.Elem().Kind() == reflect.Uint8 {
					ok = isString(v)
					break
				}
				l, isList := v.([]any)
				if ok = isList; ok {
					for i := range l {
						if !walk(l[i], t.Elem(), fld.Index(i)) {
							l[i] = nil
						}
					}
				}
			case reflect.String:
				ok = isString(v)
			case reflect.Bool:
				_, ok = v.(bool)
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				ok = isInteger(v, t.Bits())
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				n, isNum := v.(json.Number)
				_, err := strconv.ParseUint(string(n), 10, t.Bits())
				ok = isNum && err == nil
			case reflect.Float32, reflect.Float64:
				ok = isNumber(v)
			}
		}
		if !ok {
			errs = append(errs, field.Invalid(fld, shownValue(v), "wrong type: want "+goType(t)))
		}
		return ok
	}
	walk(v, t, fld)
	return errs
}

// goType names the Go type a value should have had, as `podpatch lint` has always named it: a
// type of the engine's own packages as policies.<Name> (match.managers' items are
// policies.Manager, declared in policies/profiles since the engine's split into packages), so that no message changes
// with the package a type lives in.
func goType(t reflect.Type) string {
	if strings.HasPrefix(t.PkgPath(), "github.com/podpatch/podpatch/policies/") && t.Name() != "" {
		return "policies." + t.Name()
	}
	return t.String()
}

// jsonField finds the type of the struct field that a JSON member named k decodes into,
// looking into inlined embedded structs.
func jsonField(t reflect.Type, k string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if inner, ok := jsonField(ft, k); ok {
					return inner, true
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		if name == k {
			return f.Type, true
		}
	}
	return nil, false
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

func isNumber(v any) bool {
	_, ok := v.(json.Number)
	return ok
}

func isInteger(v any, bits int) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	_, err := strconv.ParseInt(string(n), 10, bits)
	return err == nil
}

func sortedKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// shownValue is how a wrong-typed value appears in its problem: a scalar as written (a string
// quoted and clipped to 64 bytes), a mapping or list by its kind and size, never its whole text.
func shownValue(v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		if len(v) > 64 {
			return strings.ToValidUTF8(v[:64], "") + "…"
		}
		return v
	case map[string]any:
		return valueKind{fmt.Sprintf("a mapping of %d key(s)", len(v))}
	case []any:
		return valueKind{fmt.Sprintf("a list of %d item(s)", len(v))}
	default: // json.Number, bool: printed as written
		return v
	}
}

// valueKind prints unquoted in a field error: field.Error renders a value that does not marshal
// to JSON with its String method.
type valueKind struct{ text string }

func (k valueKind) String() string { return k.text }

// MarshalJSON fails, so that field.Error prints String instead.
func (k valueKind) MarshalJSON() ([]byte, error) { return nil, errors.New("not JSON: " + k.text) }

// quantityFields hold resource quantities: maps of them, or (sizeLimit) one.
var quantityFields = map[string]bool{"limits": true, "requests": true, "overhead": true, "sizeLimit": true}

// Quantities reports every value under a quantity field of a document tree that does not parse
// and, in place, replaces it with "0" and drops null quantities (a removal is not compared as
// zero).
func Quantities(v any) field.ErrorList {
	var errs field.ErrorList
	walkQuantities(v, nil, func(q any, at *field.Path) bool {
		if validQuantity(q) {
			return false
		}
		errs = append(errs, field.Invalid(at, q, "not a valid resource quantity (e.g. 500m, 2Gi, 1)"))
		return true
	})
	return errs
}

// walkQuantities calls visit for every quantity in a document tree; when visit returns true
// the quantity is replaced by "0". Null quantities are removed, unvisited.
func walkQuantities(v any, fld *field.Path, visit func(q any, at *field.Path) bool) {
	child := func(fld *field.Path, k string) *field.Path {
		if fld == nil {
			return field.NewPath(k)
		}
		return fld.Child(k)
	}
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			x := t[k]
			if !quantityFields[k] {
				walkQuantities(x, child(fld, k), visit)
				continue
			}
			if m, ok := x.(map[string]any); ok {
				for _, rk := range slices.Sorted(maps.Keys(m)) {
					switch {
					case m[rk] == nil:
						delete(m, rk)
					case visit(m[rk], child(fld, k).Key(rk)):
						m[rk] = "0"
					}
				}
			} else if x != nil && k == "sizeLimit" && visit(x, child(fld, k)) {
				t[k] = "0"
			}
		}
	case []any:
		for i, x := range t {
			walkQuantities(x, fld.Index(i), visit)
		}
	}
}

func validQuantity(v any) bool {
	var s string
	switch t := v.(type) {
	case string:
		s = t
	case json.Number:
		s = t.String()
	default:
		return false
	}
	_, err := resource.ParseQuantity(s)
	return err == nil
}
