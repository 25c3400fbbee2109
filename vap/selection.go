package vap

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/podpatch/podpatch/internal/celtext"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The selection stage: a policy's match (reference §3) and the recognition of its managers and
// roles (reference §2, profiles.Recognise) as CEL on the object at a root — the object, or the
// object before an update (group.go states both) — and its namespaceSelector as the binding's.
// Where a part of the match cannot be stated, the policy is not generated for that kind (an
// unsure selection would deny objects podpatch never patches).

// labelsAt and selectorAt are the label maps recognition reads, in the object at root ("object",
// or "oldObject" for the object before an update): an object's labels, a Service's selector.
func labelsAt(root string) mapAt   { return mapAt{root + ".metadata", []string{"labels"}} }
func selectorAt(root string) mapAt { return mapAt{root + ".spec", []string{"selector"}} }

// mapAt is a string map in the object: its root and the path from it.
type mapAt struct {
	root string
	path []string
}

func (m mapAt) in(k string, vals []string) string { return entryIn(m.root, m.path, k, vals) }
func (m mapAt) has(k string) string               { return entryPresent(m.root, m.path, k) }
func (m mapAt) lacks(k string) string             { return entryAbsent(m.root, m.path, k) }
func (m mapAt) value(k string) string             { return entryValue(m.root, m.path, k) }

// recognisesAs is `profile pr recognises the labels at m with one of roles` (none: any role).
func recognisesAs(pr profiles.Profile, roles []profiles.Role, m mapAt) string {
	var natives []string
	for native, r := range pr.Roles {
		if len(roles) == 0 || slices.Contains(roles, r) {
			natives = append(natives, native)
		}
	}
	if len(natives) == 0 {
		return "false"
	}
	slices.Sort(natives)
	out := m.in(pr.RoleKey, natives)
	if pr.RequireKey != "" {
		if pr.RequireValue != "" {
			out += " && " + m.in(pr.RequireKey, []string{pr.RequireValue})
		} else {
			out += " && " + m.has(pr.RequireKey)
		}
	}
	return out
}

// firstToRecognise is `the manager's profile is the first, in recognition order, that
// recognises the labels at m, with one of roles`.
func firstToRecognise(i int, all []profiles.Profile, roles []profiles.Role, m mapAt) string {
	parts := []string{recognisesAs(all[i], roles, m)}
	for _, earlier := range all[:i] {
		parts = append(parts, "!("+recognisesAs(earlier, nil, m)+")")
	}
	return "(" + strings.Join(parts, " && ") + ")"
}

// anyRecognises is `some profile recognises the labels at m`.
func anyRecognises(all []profiles.Profile, m mapAt) string {
	parts := make([]string, len(all))
	for i, pr := range all {
		parts[i] = "(" + recognisesAs(pr, nil, m) + ")"
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

// webhookSelects is `the mutating webhook's objectSelectors send this Service to podpatch`
// (manifests/base/mutatingwebhook.yaml): a scheduler's role labels where the manager's
// Services carry its Pods' labels, else the profile's ServiceLabels. A Service podpatch never
// sees is never held to its policies.
func webhookSelects(all []profiles.Profile, root string) string {
	serviceLabels := labelsAt(root)
	var parts []string
	for _, pr := range all {
		if pr.ServiceLabels == nil {
			parts = append(parts, "("+recognisesAs(pr, []profiles.Role{profiles.RoleScheduler}, serviceLabels)+")")
			continue
		}
		var req []string
		for _, k := range slices.Sorted(maps.Keys(pr.ServiceLabels)) {
			if v := pr.ServiceLabels[k]; v != "" {
				req = append(req, serviceLabels.in(k, []string{v}))
			} else {
				req = append(req, serviceLabels.has(k))
			}
		}
		parts = append(parts, "("+strings.Join(req, " && ")+")")
	}
	return "(" + strings.Join(parts, " || ") + ")"
}

// selects states p's selection of objects of kind k in the object at root as one CEL
// expression, given that the group's objects are recognised as manager pr (a Pod's, by its own
// labels; a Service's selection states recognition itself, as a Service's label selector cannot
// reach its spec.selector): the policy's selector, namespaces, and a Pod's clusters and groups
// through pr's labels. "" when it adds nothing to recognition.
func selects(p *policies.Policy, k profiles.Kind, pr profiles.Profile, root string) (string, error) {
	var parts []string
	if k == profiles.KindService {
		s, err := serviceRecognition(p, root)
		if err != nil {
			return "", err
		}
		parts = append(parts, s)
	} else {
		names, err := namesMatch(p, pr, root)
		if err != nil {
			return "", err
		}
		if names != "" {
			parts = append(parts, names)
		}
	}
	if sel := p.Selector(); sel != nil {
		expr, err := selectorExpression(sel, labelsAt(root))
		if err != nil {
			return "", fmt.Errorf("match.selector: %w", err)
		}
		if expr != "" {
			parts = append(parts, "("+expr+")")
		}
	}
	if globs := p.Namespaces(); len(globs) > 0 {
		test, ok := globTest("request.namespace", globs)
		if !ok {
			return "", fmt.Errorf("match.namespaces: a glob with a character class or escape")
		}
		parts = append(parts, test)
	}
	return strings.Join(parts, " && "), nil
}

// serviceRecognition is `podpatch sees the Service at root (the mutating webhook's
// objectSelectors, by its own labels) and recognises it as one of p's managers and roles` (by
// its selector, else its own labels: profiles.Recognise).
func serviceRecognition(p *policies.Policy, root string) (string, error) {
	if len(p.Clusters())+len(p.Groups()) > 0 {
		return "", fmt.Errorf("match.clusters and match.groups on a Service (its names come from two label maps)")
	}
	all := profiles.All()
	serviceLabels, serviceSelector := labelsAt(root), selectorAt(root)
	var disjuncts []string
	if len(p.Managers()) == 0 && len(p.Roles()) == 0 {
		// Any manager, any role: that some profile recognises the object is the whole condition.
		disjuncts = []string{anyRecognises(all, serviceSelector), anyRecognises(all, serviceLabels)}
	} else {
		for i, pr := range all {
			if len(p.Managers()) > 0 && !slices.Contains(p.Managers(), pr.Manager) {
				continue
			}
			disjuncts = append(disjuncts, "("+firstToRecognise(i, all, p.Roles(), serviceSelector)+" || (!"+anyRecognises(all, serviceSelector)+
				" && "+firstToRecognise(i, all, p.Roles(), serviceLabels)+"))")
		}
	}
	return "(" + webhookSelects(all, root) + " && (" + strings.Join(disjuncts, " || ") + "))", nil
}

// namespaceRequirements are p's namespaceSelector as the binding's.
func namespaceRequirements(p *policies.Policy) ([]metav1.LabelSelectorRequirement, error) {
	sel := p.NamespaceSelector()
	if sel == nil {
		return nil, nil
	}
	reqs, err := labelSelectorRequirements(sel)
	if err != nil {
		return nil, fmt.Errorf("match.namespaceSelector: %w", err)
	}
	return reqs, nil
}

// namesMatch is a Pod's cluster and group at root against p's globs for one profile
// (profiles.Recognise: the first ClusterKey with a value; the GroupKey), "" when p names neither.
func namesMatch(p *policies.Policy, pr profiles.Profile, root string) (string, error) {
	podLabels := labelsAt(root)
	var parts []string
	if globs := p.Clusters(); len(globs) > 0 {
		name := `""`
		for _, key := range slices.Backward(pr.ClusterKeys) {
			name = "(" + podLabels.value(key) + ` != "" ? ` + podLabels.value(key) + " : " + name + ")"
		}
		m, ok := globMatch(name, globs)
		if !ok {
			return "", fmt.Errorf("match.clusters: a glob with a character class or escape")
		}
		parts = append(parts, m)
	}
	if globs := p.Groups(); len(globs) > 0 {
		m, ok := globMatch(podLabels.value(pr.GroupKey), globs)
		if !ok {
			return "", fmt.Errorf("match.groups: a glob with a character class or escape")
		}
		if pr.GroupKey == "" {
			m = "false" // no group: never matches a policy that asks for one
		}
		parts = append(parts, m)
	}
	return strings.Join(parts, " && "), nil
}

// globMatch is policies' anyGlob: a name, non-empty and at most 63 bytes, matching one of globs.
func globMatch(name string, globs []string) (string, bool) {
	test, ok := globTest(name, globs)
	if !ok {
		return "", false
	}
	return "(" + name + ` != "" && size(` + name + ") <= 63 && " + test + ")", true
}

// selectorExpression states a label selector on the labels at m.
func selectorExpression(sel labels.Selector, m mapAt) (string, error) {
	parts, err := celtext.Selector(sel, celtext.LabelTests{In: m.in, Has: m.has, Lacks: m.lacks})
	return strings.Join(parts, " && "), err
}

// labelSelectorRequirements states a compiled selector as a LabelSelector's expressions.
func labelSelectorRequirements(sel labels.Selector) ([]metav1.LabelSelectorRequirement, error) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil, fmt.Errorf("selects nothing")
	}
	var out []metav1.LabelSelectorRequirement
	for _, r := range reqs {
		vals := sortedValues(r.Values().UnsortedList())
		var op metav1.LabelSelectorOperator
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			op = metav1.LabelSelectorOpIn
		case selection.NotIn, selection.NotEquals:
			op = metav1.LabelSelectorOpNotIn
		case selection.Exists:
			op, vals = metav1.LabelSelectorOpExists, nil
		case selection.DoesNotExist:
			op, vals = metav1.LabelSelectorOpDoesNotExist, nil
		default:
			return nil, fmt.Errorf("operator %s", r.Operator())
		}
		out = append(out, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: op, Values: vals})
	}
	return out, nil
}

func sortedValues(vs []string) []string {
	slices.Sort(vs)
	return vs
}
