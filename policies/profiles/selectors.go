package profiles

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// ObjectSelectors returns, one per built-in profile, a label selector for the objects whose own
// labels that profile recognises (reference §2): its role label with one of the profile's role
// values, and its required label. Together they select every Pod a profile can recognise, so
// that a reader of the cluster (`podpatch audit`) can list those and not every Pod. Services
// are recognised by their spec.selector too, which no label selector reaches.
func ObjectSelectors() []labels.Selector {
	out := make([]labels.Selector, 0, len(profiles))
	for _, pr := range profiles {
		roles, err := labels.NewRequirement(pr.RoleKey, selection.In, slices.Sorted(maps.Keys(pr.Roles)))
		if err != nil {
			panic(err) // the profiles are constants; a failure is a programming error
		}
		sel := labels.NewSelector().Add(*roles)
		if pr.RequireKey != "" {
			op, vals := selection.Exists, []string(nil)
			if pr.RequireValue != "" {
				op, vals = selection.Equals, []string{pr.RequireValue}
			}
			req, err := labels.NewRequirement(pr.RequireKey, op, vals)
			if err != nil {
				panic(err)
			}
			sel = sel.Add(*req)
		}
		out = append(out, sel)
	}
	return out
}
