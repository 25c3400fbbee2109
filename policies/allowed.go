package policies

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultNamespaceAllowedFields is what namespace policies may set unless the platform says
// otherwise (SPEC §3). Entries are paths inside the patched object; `[*]` stands for every item
// of a list; a `service.` prefix makes an entry apply to Service patches instead of pod templates.
var DefaultNamespaceAllowedFields = []string{
	"metadata.labels",
	"metadata.annotations",
	"spec.nodeSelector",
	"spec.tolerations",
	"spec.affinity",
	"spec.topologySpreadConstraints",
	"spec.priorityClassName",
	"spec.containers[*].resources",
	"spec.containers[*].env",
	"service.metadata.labels",
	"service.metadata.annotations",
}

// AllowedFields is the compiled form of the fields namespace policies may set.
type AllowedFields struct {
	template [][]string
	service  [][]string
	entries  []string
}

// ParseAllowedFields compiles entries such as "spec.containers[*].resources" or
// "service.metadata.annotations".
func ParseAllowedFields(entries []string) (AllowedFields, error) {
	var a AllowedFields
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		target := &a.template
		rest := strings.TrimPrefix(e, "template.")
		if s, ok := strings.CutPrefix(e, "service."); ok {
			target, rest = &a.service, s
		}
		segs, err := splitAllowedPath(rest)
		if err != nil {
			return AllowedFields{}, fmt.Errorf("allowed field %q: %w", e, err)
		}
		*target = append(*target, segs)
		a.entries = append(a.entries, e)
	}
	sort.Strings(a.entries)
	return a, nil
}

// String lists the entries, as the flag takes them.
func (a AllowedFields) String() string { return strings.Join(a.entries, ",") }

func splitAllowedPath(p string) ([]string, error) {
	var segs []string
	for _, part := range strings.Split(p, ".") {
		name, list := strings.CutSuffix(part, "[*]")
		if name == "" || strings.ContainsAny(name, "[]*") {
			return nil, fmt.Errorf("want dot-separated field names, with [*] after a list field")
		}
		segs = append(segs, name)
		if list {
			segs = append(segs, "[*]")
		}
	}
	if segs[0] != "metadata" && segs[0] != "spec" {
		return nil, fmt.Errorf("must start with metadata or spec")
	}
	return segs, nil
}

// check reports every field set in raw (a template or service patch) that no allowed entry
// covers. A list item's merge key (`name`) is allowed wherever a path runs through the list.
func checkAllowed(raw any, allowed [][]string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = strings.ReplaceAll(strings.Join(a, "."), ".[*]", "[*]")
	}
	all := strings.Join(names, ", ")
	if all == "" {
		all = "nothing"
	}
	var walk func(v any, segs []string, fld *field.Path)
	walk = func(v any, segs []string, fld *field.Path) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				next := append(segs[:len(segs):len(segs)], k)
				switch {
				case coveredBy(next, allowed):
				case leadsTo(next, allowed):
					walk(t[k], next, fld.Child(k))
				case k == "name" && len(segs) > 0 && segs[len(segs)-1] == "[*]":
				default:
					errs = append(errs, field.Forbidden(fld.Child(k),
						"namespace policies may set only: "+all))
				}
			}
		case []any:
			next := append(segs[:len(segs):len(segs)], "[*]")
			for i, item := range t {
				walk(item, next, fld.Index(i))
			}
		}
	}
	walk(raw, nil, fld)
	return errs
}

// coveredBy reports whether some allowed path is a prefix of p.
func coveredBy(p []string, allowed [][]string) bool {
	for _, a := range allowed {
		if len(a) <= len(p) && equalSegs(a, p[:len(a)]) {
			return true
		}
	}
	return false
}

// leadsTo reports whether p is a strict prefix of some allowed path.
func leadsTo(p []string, allowed [][]string) bool {
	for _, a := range allowed {
		if len(p) < len(a) && equalSegs(p, a[:len(p)]) {
			return true
		}
	}
	return false
}

func equalSegs(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
