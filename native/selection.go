package native

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/internal/celtext"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The selection stage. A compiled group is one manager's role (reference §2): its binding's
// objectSelector is that profile's recognition labels, so that the API server rejects every
// other Pod before any CEL runs; a match condition leaves out the Pods an earlier profile
// recognises (profiles.Recognise takes the first). Inside the group each policy's own match
// (reference §3: selector, clusters, groups, namespaces, namespaceSelector, its namespace for
// a namespace policy, the skip label) is one CEL variable that its mutations read.

var (
	podLabels       = labelsOf("object.metadata.labels")
	namespaceLabels = labelsOf("namespaceObject.metadata.labels")
)

// objectSelector is the binding's objectSelector for a profile's role: the labels
// profiles.Recognise reads for it.
func objectSelector(pr profiles.Profile, r profiles.Role) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: pr.RoleKey, Operator: metav1.LabelSelectorOpIn, Values: pr.RoleNames(r)},
	}}
	switch {
	case pr.RequireKey == "":
	case pr.RequireValue != "":
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: pr.RequireKey, Operator: metav1.LabelSelectorOpIn, Values: []string{pr.RequireValue}})
	default:
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: pr.RequireKey, Operator: metav1.LabelSelectorOpExists})
	}
	return sel
}

// recognises is `profile pr recognises the Pod's labels, in any role`.
func recognises(pr profiles.Profile) string {
	var roles []string
	for native := range pr.Roles {
		roles = append(roles, native)
	}
	slices.Sort(roles)
	out := podLabels.in(pr.RoleKey, roles)
	switch {
	case pr.RequireKey == "":
	case pr.RequireValue != "":
		out += " && " + podLabels.in(pr.RequireKey, []string{pr.RequireValue})
	default:
		out += " && " + podLabels.has(pr.RequireKey)
	}
	return "(" + out + ")"
}

// firstProfile is the match condition that no profile before the i-th recognises the Pod; ""
// when it is the first.
func firstProfile(all []profiles.Profile, i int) string {
	var parts []string
	for _, earlier := range all[:i] {
		parts = append(parts, "!"+recognises(earlier))
	}
	if len(parts) == 0 {
		return ""
	}
	return and(parts)
}

// selectsIn says whether a policy can select Pods of a manager's role at all.
func selectsIn(p *policies.Policy, m profiles.Manager, r profiles.Role) bool {
	return (len(p.Managers()) == 0 || slices.Contains(p.Managers(), m)) &&
		(len(p.Roles()) == 0 || slices.Contains(p.Roles(), r))
}

// The variables the selections of a group share, each evaluated once a create however many
// policies read it (sharedVariables).
const (
	skippedVar = "skipped"     // the Pod is labelled podpatch.io/skip: "true"
	clusterVar = "clusterName" // the Pod's cluster by its profile's keys, "" when none
)

// sharedVariables are the shared variables of a group's profile that its variables read, to be
// stated before them.
func sharedVariables(pr profiles.Profile, read []admissionregistrationv1.Variable) []admissionregistrationv1.Variable {
	var out []admissionregistrationv1.Variable
	for _, v := range []admissionregistrationv1.Variable{
		{Name: skippedVar, Expression: podLabels.in(policies.SkipLabel, []string{"true"})},
		{Name: clusterVar, Expression: clusterName(pr)},
	} {
		if slices.ContainsFunc(read, func(r admissionregistrationv1.Variable) bool {
			return strings.Contains(r.Expression, "variables."+v.Name)
		}) {
			out = append(out, v)
		}
	}
	return out
}

// clusterName is the Pod's cluster: the first of the profile's cluster keys it has a value
// of, else "".
func clusterName(pr profiles.Profile) string {
	name := `""`
	for _, key := range slices.Backward(pr.ClusterKeys) {
		name = "(" + podLabels.value(key) + ` != "" ? ` + podLabels.value(key) + " : " + name + ")"
	}
	return name
}

// selectionOf is p's match on a Pod its group's profile recognises, as one CEL condition, or
// why it cannot be stated. It reads the shared variables, the cheapest tests first.
func selectionOf(p *policies.Policy, pr profiles.Profile) (string, error) {
	var parts []string
	if p.Scope == policies.ScopeNamespace {
		parts = append(parts, "request.namespace == "+celtext.Quote(p.Namespace))
	}
	if globs := p.Namespaces(); len(globs) > 0 {
		m, ok := globMatch("request.namespace", globs)
		if !ok {
			return "", fmt.Errorf("match.namespaces: a glob with a character class or escape")
		}
		parts = append(parts, m)
	}
	if p.Mode != policies.ModeEnforce {
		// An object labelled podpatch.io/skip: "true" gets the enforce layer only (reference §3).
		parts = append(parts, "!variables."+skippedVar)
	}
	if sel := p.Selector(); sel != nil {
		expr, err := selectorExpression(sel, podLabels)
		if err != nil {
			return "", fmt.Errorf("match.selector: %w", err)
		}
		parts = append(parts, expr)
	}
	if globs := p.Clusters(); len(globs) > 0 {
		m, ok := globMatch("variables."+clusterVar, globs)
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
	if sel := p.NamespaceSelector(); sel != nil {
		expr, err := selectorExpression(sel, namespaceLabels)
		if err != nil {
			return "", fmt.Errorf("match.namespaceSelector: %w", err)
		}
		parts = append(parts, expr)
	}
	return and(parts), nil
}

// selectorExpression states a label selector on a label map.
func selectorExpression(sel labels.Selector, m labelsOf) (string, error) {
	lacks := func(k string) string { return "!" + m.has(k) }
	parts, err := celtext.Selector(sel, celtext.LabelTests{In: m.in, Has: m.has, Lacks: lacks})
	return and(parts), err
}

// selectorKeys are the label keys a policy's selector reads.
func selectorKeys(p *policies.Policy) []string {
	if p.Selector() == nil {
		return nil
	}
	reqs, _ := p.Selector().Requirements()
	var out []string
	for _, r := range reqs {
		out = append(out, r.Key())
	}
	return out
}
