package vap

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The selection stage: a policy's match (reference §3) and the recognition of its managers and
// roles (reference §2, profiles.Recognise) as CEL match conditions on the final object, and its
// namespaceSelector as the binding's. Where a part of the match cannot be stated, the policy is
// not generated for that kind (an unsure selection would deny objects podpatch never patches).

// The label maps recognition reads.
var (
	podLabels       = mapAt{"object.metadata", []string{"labels"}}
	serviceLabels   = mapAt{"object.metadata", []string{"labels"}}
	serviceSelector = mapAt{"object.spec", []string{"selector"}}
)

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
func webhookSelects(all []profiles.Profile) string {
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

// match is a policy's match as CEL conditions, each named; the namespaceSelector's
// requirements for the binding.
type match struct {
	conditions []condition
	namespaces []metav1.LabelSelectorRequirement
}

type condition struct{ name, expression string }

// selectionOf states p's selection of objects of kind k, or why it cannot.
func selectionOf(p *policies.Policy, k profiles.Kind) (match, error) {
	var s match
	all := profiles.All()
	managers := p.Managers()
	var disjuncts []string
	for i, pr := range all {
		if len(managers) > 0 && !slices.Contains(managers, pr.Manager) {
			continue
		}
		var d string
		if k == profiles.KindService {
			if len(p.Clusters())+len(p.Groups()) > 0 {
				return s, fmt.Errorf("match.clusters and match.groups on a Service (its names come from two label maps)")
			}
			d = "(" + firstToRecognise(i, all, p.Roles(), serviceSelector) + " || (!" + anyRecognises(all, serviceSelector) +
				" && " + firstToRecognise(i, all, p.Roles(), serviceLabels) + "))"
		} else {
			d = firstToRecognise(i, all, p.Roles(), podLabels)
			names, err := namesMatch(p, pr)
			if err != nil {
				return s, err
			}
			if names != "" {
				d = "(" + d + " && " + names + ")"
			}
		}
		disjuncts = append(disjuncts, d)
	}
	if len(disjuncts) == 0 {
		return s, fmt.Errorf("no manager to recognise")
	}
	if len(managers) == 0 && len(p.Roles()) == 0 && len(p.Clusters())+len(p.Groups()) == 0 {
		// Any manager, any role: that some profile recognises the object is the whole condition.
		disjuncts = []string{anyRecognises(all, podLabels)}
		if k == profiles.KindService {
			disjuncts = []string{anyRecognises(all, serviceSelector), anyRecognises(all, serviceLabels)}
		}
	}
	if k == profiles.KindService {
		s.conditions = append(s.conditions, condition{"podpatch-sees-service", webhookSelects(all)})
	}
	s.conditions = append(s.conditions, condition{"podpatch-recognises", strings.Join(disjuncts, " || ")})
	if sel := p.Selector(); sel != nil {
		lbl := podLabels
		if k == profiles.KindService {
			lbl = serviceLabels
		}
		expr, err := selectorExpression(sel, lbl)
		if err != nil {
			return s, fmt.Errorf("match.selector: %w", err)
		}
		if expr != "" {
			s.conditions = append(s.conditions, condition{"policy-selector", expr})
		}
	}
	if globs := p.Namespaces(); len(globs) > 0 {
		re, ok := globRegexp(globs)
		if !ok {
			return s, fmt.Errorf("match.namespaces: a glob with a character class or escape")
		}
		s.conditions = append(s.conditions, condition{"policy-namespaces", "request.namespace.matches(" + lit(re) + ")"})
	}
	if sel := p.NamespaceSelector(); sel != nil {
		reqs, err := labelSelectorRequirements(sel)
		if err != nil {
			return s, fmt.Errorf("match.namespaceSelector: %w", err)
		}
		s.namespaces = reqs
	}
	return s, nil
}

// namesMatch is a Pod's cluster and group against p's globs for one profile (profiles.Recognise:
// the first ClusterKey with a value; the GroupKey), "" when p names neither.
func namesMatch(p *policies.Policy, pr profiles.Profile) (string, error) {
	var parts []string
	if globs := p.Clusters(); len(globs) > 0 {
		re, ok := globRegexp(globs)
		if !ok {
			return "", fmt.Errorf("match.clusters: a glob with a character class or escape")
		}
		name := `""`
		for _, key := range slices.Backward(pr.ClusterKeys) {
			name = "(" + podLabels.value(key) + ` != "" ? ` + podLabels.value(key) + " : " + name + ")"
		}
		parts = append(parts, globMatch(name, re))
	}
	if globs := p.Groups(); len(globs) > 0 {
		re, ok := globRegexp(globs)
		if !ok {
			return "", fmt.Errorf("match.groups: a glob with a character class or escape")
		}
		if pr.GroupKey == "" {
			parts = append(parts, "false") // no group: never matches a policy that asks for one
		} else {
			parts = append(parts, globMatch(podLabels.value(pr.GroupKey), re))
		}
	}
	return strings.Join(parts, " && "), nil
}

// globMatch is policies' anyGlob: a name, non-empty and at most 63 bytes, matching re.
func globMatch(name, re string) string {
	return "(" + name + ` != "" && size(` + name + ") <= 63 && " + name + ".matches(" + lit(re) + "))"
}

// selectorExpression states a label selector on the labels at m.
func selectorExpression(sel labels.Selector, m mapAt) (string, error) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return "false", nil
	}
	var parts []string
	for _, r := range reqs {
		vals := sortedValues(r.Values().UnsortedList()) // Values is a set
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			parts = append(parts, m.in(r.Key(), vals))
		case selection.NotIn, selection.NotEquals:
			parts = append(parts, "!"+m.in(r.Key(), vals))
		case selection.Exists:
			parts = append(parts, m.has(r.Key()))
		case selection.DoesNotExist:
			parts = append(parts, m.lacks(r.Key()))
		default:
			return "", fmt.Errorf("operator %s", r.Operator())
		}
	}
	return strings.Join(parts, " && "), nil
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
