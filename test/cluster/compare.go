package cluster

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/resource"

	"sigs.k8s.io/yaml"
)

// The API server adds to what it stores (defaults, a name for generateName, default
// tolerations) and drops zero values of omitempty fields. These helpers compare an expected
// object with a stored one on the expected object's fields only.

// Subset reports whether every field of want is in got with the same value: objects key by
// key, list items anywhere in got's list, zero scalars also when got lacks the key.
func Subset(want, got any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			gv, present := g[k]
			if (!present && !IsZero(wv)) || (present && !Subset(wv, gv)) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok {
			return false
		}
		for _, wv := range w {
			found := false
			for _, gv := range g {
				if Subset(wv, gv) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(numbers(want), numbers(got))
	}
}

// Project keeps, from got, only the fields want has, list items matched by content, so that a
// diff shows what changed in want's fields and not the API server's additions.
func Project(want, got any) any {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := map[string]any{}
		for k, wv := range w {
			if gv, ok := g[k]; ok {
				out[k] = Project(wv, gv)
			} else if IsZero(wv) {
				out[k] = wv
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return got
		}
		out := make([]any, 0, len(w))
		for i, wv := range w {
			match := -1
			for j, gv := range g {
				if Subset(wv, gv) {
					match = j
					break
				}
			}
			if match < 0 && i < len(g) {
				match = i
			}
			if match >= 0 {
				out = append(out, Project(wv, g[match]))
			}
		}
		return out
	default:
		return got
	}
}

// IsZero reports a zero scalar (0, "", false): the API server omits it for omitempty fields.
func IsZero(v any) bool {
	switch x := numbers(v).(type) {
	case float64:
		return x == 0
	case string:
		return x == ""
	case bool:
		return !x
	}
	return false
}

// numbers makes a scalar compare alike whichever decoder produced it (int64, float64, json.Number).
func numbers(v any) any {
	switch v.(type) {
	case map[string]any, []any, nil, string, bool:
		return v
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

// CanonicalQuantities rewrites, in place, every quantity under a "limits" or "requests" object
// in its canonical form, as the API server stores it ("1.000" is "1", "2048Mi" is "2Gi"), so
// an object as sent and as stored compare alike.
func CanonicalQuantities(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if q, ok := child.(map[string]any); ok && (k == "limits" || k == "requests") {
				for name, val := range q {
					s, ok := val.(string)
					if !ok {
						continue
					}
					parsed, err := resource.ParseQuantity(s)
					if err != nil {
						return fmt.Errorf("%s[%s]: %w", k, name, err)
					}
					q[name] = parsed.String()
				}
			}
			if err := CanonicalQuantities(child); err != nil {
				return err
			}
		}
	case []any:
		for _, item := range x {
			if err := CanonicalQuantities(item); err != nil {
				return err
			}
		}
	}
	return nil
}
