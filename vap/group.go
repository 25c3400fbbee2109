package vap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies/profiles"
)

// The grouping stage: the parts as few objects as the API server evaluates cheaply. The API
// server looks at every binding on every admission of a Pod or Service (its namespaceSelector,
// then its objectSelector, then the policy's match conditions, then its variables and
// validations, k8s.io/apiserver's admission/plugin/policy/matching): a rejection by a selector
// costs a few microseconds, one by CEL tens. So a group is the objects one selector pair can
// tell: a Pod's manager and role by the labels its profile recognises (Profile.RoleKey with the
// role's values, RequireKey), a Service by the labels of one of the mutating webhook's entries
// for Services; and the namespaceSelector of the policies in it. The API server matches an
// objectSelector against the new object and, on an update, the old one, so an update that
// relabels an object out of its group is still looked at, and each part's selection is stated
// on both.

// groupKey identifies a group: the kind, the manager, a Pod's role, the policies'
// namespaceSelector.
type groupKey struct {
	kind       profiles.Kind
	manager    profiles.Manager
	role       profiles.Role
	namespaces string
}

// groupOf is a group's parts, and what its binding selects.
type groupOf struct {
	key        groupKey
	profile    int // the manager's index in recognition order
	object     metav1.LabelSelector
	namespaces []metav1.LabelSelectorRequirement
	parts      []*part
}

// group puts the parts into objects, in profile, role and namespaceSelector order.
func group(parts []*part, o Options) []Generated {
	all := profiles.All()
	var order []groupKey
	groups := map[groupKey]*groupOf{}
	add := func(k groupKey, i int, sel metav1.LabelSelector, pt *part) {
		g, ok := groups[k]
		if !ok {
			g = &groupOf{key: k, profile: i, object: sel, namespaces: pt.namespaces}
			groups[k] = g
			order = append(order, k)
		}
		g.parts = append(g.parts, pt)
	}
	for _, pt := range parts {
		ns := fmt.Sprint(pt.namespaces)
		for i, pr := range all {
			if pt.Kind == profiles.KindService {
				// Every Service policy in every webhook entry's group: the entry's labels say
				// podpatch sees the Service, its selection says which manager it is.
				add(groupKey{pt.Kind, pr.Manager, "", ns}, i, serviceSelector(pr), pt)
				continue
			}
			if ms := pt.policy.Managers(); len(ms) > 0 && !slices.Contains(ms, pr.Manager) {
				continue
			}
			for _, r := range rolesOf(pr) {
				if rs := pt.policy.Roles(); len(rs) > 0 && !slices.Contains(rs, r) {
					continue
				}
				add(groupKey{pt.Kind, pr.Manager, r, ns}, i, podSelector(pr, r), pt)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b groupKey) int {
		return strings.Compare(string(a.kind), string(b.kind))
	})
	var out []Generated
	for _, k := range order {
		g := groups[k]
		if k.kind == profiles.KindService {
			for n, chunk := range chunks(g.parts, o.MaxGroupValidations, o) {
				out = append(out, g.generate(all, n, chunk, false, o))
			}
			continue
		}
		// A Pod's policies that select every object of the group, then those with a selection
		// of their own in objects of at most maxSelectiveValidations whose match condition is
		// the selection of any of them: the API server evaluates every validation of an object
		// it matches (microseconds each), so a create pays for the validations of the policies
		// that could select it, and a match condition for the others.
		var every, selective []*part
		for _, pt := range g.parts {
			if now, _ := selects(pt.policy, k.kind, all[g.profile], "object"); now == "" {
				every = append(every, pt)
			} else {
				selective = append(selective, pt)
			}
		}
		n := 0
		for _, chunk := range chunks(every, o.MaxGroupValidations, o) {
			out = append(out, g.generate(all, n, chunk, false, o))
			n++
		}
		for _, chunk := range chunks(selective, min(o.MaxGroupValidations, maxSelectiveValidations), o) {
			out = append(out, g.generate(all, n, chunk, true, o))
			n++
		}
	}
	return out
}

// maxSelectiveValidations bounds the validations of an object of policies with a selection of
// their own, all of which an object any of them selects pays for; maxSelectiveCondition the
// bytes of that object's match condition (their selections, on the object and the object
// before an update).
const (
	maxSelectiveValidations = 64
	maxSelectiveCondition   = 64 << 10
)

// rolesOf are a profile's canonical roles, sorted.
func rolesOf(pr profiles.Profile) []profiles.Role {
	return slices.Sorted(maps.Keys(setOf(slices.Collect(maps.Values(pr.Roles)))))
}

func setOf[T comparable](vs []T) map[T]bool {
	m := make(map[T]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

// podSelector selects exactly the Pods whose own labels pr recognises with role r
// (profiles.Recognise: the role label with one of the role's names, the required label).
func podSelector(pr profiles.Profile, r profiles.Role) metav1.LabelSelector {
	reqs := []metav1.LabelSelectorRequirement{{Key: pr.RoleKey, Operator: metav1.LabelSelectorOpIn, Values: pr.RoleNames(r)}}
	return metav1.LabelSelector{MatchExpressions: append(reqs, required(pr)...)}
}

// required is a profile's required label as a requirement.
func required(pr profiles.Profile) []metav1.LabelSelectorRequirement {
	switch {
	case pr.RequireKey == "":
		return nil
	case pr.RequireValue != "":
		return []metav1.LabelSelectorRequirement{{Key: pr.RequireKey, Operator: metav1.LabelSelectorOpIn, Values: []string{pr.RequireValue}}}
	}
	return []metav1.LabelSelectorRequirement{{Key: pr.RequireKey, Operator: metav1.LabelSelectorOpExists}}
}

// serviceSelector is the mutating webhook's objectSelector for pr's Services
// (manifests/base/mutatingwebhook.yaml, webhookSelects): a scheduler's role labels where the
// manager's Services carry its Pods' labels, else the profile's ServiceLabels.
func serviceSelector(pr profiles.Profile) metav1.LabelSelector {
	if pr.ServiceLabels == nil {
		return podSelector(pr, profiles.RoleScheduler)
	}
	var reqs []metav1.LabelSelectorRequirement
	for _, k := range slices.Sorted(maps.Keys(pr.ServiceLabels)) {
		if v := pr.ServiceLabels[k]; v != "" {
			reqs = append(reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
		} else {
			reqs = append(reqs, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpExists})
		}
	}
	return metav1.LabelSelector{MatchExpressions: reqs}
}

// chunks splits a group's parts, in order, into objects within the bounds of one.
func chunks(parts []*part, maxValidations int, o Options) [][]*part {
	var out [][]*part
	var cur []*part
	validations, size, condition := 0, 0, 0
	for _, pt := range parts {
		n, b := len(pt.validations), len(pt.heldBefore)
		for _, v := range pt.validations {
			b += len(v.Expression) + len(v.Message)
		}
		c := 0
		for _, pr := range profiles.All() {
			now, _ := selects(pt.policy, pt.Kind, pr, "object")
			c = max(c, 2*len(now)+8)
		}
		if len(cur) > 0 && (validations+n > maxValidations || size+b > o.MaxGroupBytes || condition+c > maxSelectiveCondition) {
			out = append(out, cur)
			cur, validations, size, condition = nil, 0, 0, 0
		}
		cur = append(cur, pt)
		validations += n
		size += b
		condition += c
	}
	if len(cur) == 0 {
		return nil
	}
	return append(out, cur)
}

// name is a group's objects' name: podpatch.<kind>.<manager>[.<role>][.ns-<hash>][.<n>].
func (g *groupOf) name(n int) string {
	parts := []string{"podpatch", strings.ToLower(string(g.key.kind)), string(g.key.manager)}
	if g.key.role != "" {
		parts = append(parts, string(g.key.role))
	}
	if len(g.namespaces) > 0 {
		h := sha256.Sum256([]byte(g.key.namespaces))
		parts = append(parts, "ns-"+hex.EncodeToString(h[:4]))
	}
	if n > 0 {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ".")
}

// Variables of a generated policy.
const (
	// recognisedVar and recognisedBeforeVar: a Pod is recognised as the group's manager and
	// role, now and before an update.
	recognisedVar       = "recognised"
	recognisedBeforeVar = "recognisedBefore"
	// selectedVar(i): the request is one part i's policy selects, by the object or, on an
	// update, the object before it; notHeldBeforeVar(i): it is an update of an object that did
	// not hold part i's checked fields before it.
	selectedPrefix      = "selected"
	notHeldBeforePrefix = "notHeldBefore"
)

func selectedVar(i int) string      { return selectedPrefix + strconv.Itoa(i) }
func notHeldBeforeVar(i int) string { return notHeldBeforePrefix + strconv.Itoa(i) }

// isUpdate guards every read of oldObject, which is null on a create.
const isUpdate = `request.operation == "UPDATE"`

// generate states one chunk of a group as a ValidatingAdmissionPolicy and its binding; a
// selective chunk's match condition is that one of its policies selects the object.
func (g *groupOf) generate(all []profiles.Profile, n int, chunk []*part, selective bool, o Options) Generated {
	pr := all[g.profile]
	gen := Generated{Kind: g.key.kind}
	var conditions []admissionregistrationv1.MatchCondition
	var variables []admissionregistrationv1.Variable
	if g.key.kind == profiles.KindPod {
		now := firstToRecognise(g.profile, all, []profiles.Role{g.key.role}, labelsAt("object"))
		before := firstToRecognise(g.profile, all, []profiles.Role{g.key.role}, labelsAt("oldObject"))
		switch {
		case selective:
			var nows, befores []string
			for _, pt := range chunk {
				n, _ := selects(pt.policy, g.key.kind, pr, "object")
				b, _ := selects(pt.policy, g.key.kind, pr, "oldObject")
				nows, befores = append(nows, n), append(befores, b)
			}
			conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: "podpatch-selects",
				Expression: "(" + now + " && (" + strings.Join(nows, " || ") + ")) || (" + isUpdate + " && " + before + " && (" + strings.Join(befores, " || ") + "))"})
		case g.profile > 0:
			// The objectSelector is the profile's recognition; an earlier profile may claim
			// the object first (profiles.Recognise).
			conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: "podpatch-recognises",
				Expression: now + " || (" + isUpdate + " && " + before + ")"})
		}
		variables = append(variables,
			admissionregistrationv1.Variable{Name: recognisedVar, Expression: now},
			admissionregistrationv1.Variable{Name: recognisedBeforeVar, Expression: isUpdate + " && " + before})
	}
	mains := map[string]bool{}
	var validations []admissionregistrationv1.Validation
	var refs, notChecked []string
	for i, pt := range chunk {
		gen.Parts = append(gen.Parts, pt.Part)
		refs = append(refs, pt.Ref)
		for _, nc := range pt.NotChecked {
			notChecked = append(notChecked, pt.Ref+": "+nc)
		}
		if pt.usesMain && !mains[string(pt.mainManager)] {
			mains[string(pt.mainManager)] = true
			for _, root := range []string{"object", "oldObject"} {
				variables = append(variables, admissionregistrationv1.Variable{Name: mainVariable(root), Expression: mainName(pt.mainManager, root)})
			}
		}
		// Selected: now, or before an update (an update that relabels the object out of the
		// policy's selection still may not undo what it held).
		now, _ := selects(pt.policy, g.key.kind, pr, "object")
		before, _ := selects(pt.policy, g.key.kind, pr, "oldObject")
		guard := ""
		switch {
		case g.key.kind == profiles.KindService:
			guard = "!variables." + selectedVar(i) + " || "
			variables = append(variables, admissionregistrationv1.Variable{Name: selectedVar(i),
				Expression: now + " || (" + isUpdate + " && " + before + ")"})
		case now != "":
			guard = "!variables." + selectedVar(i) + " || "
			variables = append(variables, admissionregistrationv1.Variable{Name: selectedVar(i),
				Expression: "(variables." + recognisedVar + " && " + now + ") || (variables." + recognisedBeforeVar + " && " + before + ")"})
		}
		heldBefore := isUpdate
		if pt.heldBefore != "" {
			heldBefore = isUpdate + " && !(" + pt.heldBefore + ")"
		}
		variables = append(variables, admissionregistrationv1.Variable{Name: notHeldBeforeVar(i), Expression: heldBefore})
		for _, v := range pt.validations {
			v.Expression = guard + "(" + v.Expression + ") || variables." + notHeldBeforeVar(i)
			validations = append(validations, v)
		}
	}
	name := g.name(n)
	meta := metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{ManagedByLabel: ManagedBy},
		Annotations: map[string]string{PolicyAnnotation: strings.Join(refs, "\n")},
	}
	if len(notChecked) > 0 {
		meta.Annotations[NotCheckedAnnotation] = clip(strings.Join(notChecked, "\n"), maxAnnotation)
	}
	resources := []string{"pods", "pods/resize", "pods/ephemeralcontainers"}
	if g.key.kind == profiles.KindService {
		resources = []string{"services"}
	}
	nsReqs := slices.Clone(g.namespaces)
	if len(o.ExcludedNamespaces) > 0 {
		nsReqs = append(nsReqs, metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name",
			Operator: metav1.LabelSelectorOpNotIn, Values: slices.Sorted(slices.Values(o.ExcludedNamespaces))})
	}
	match := func() *admissionregistrationv1.MatchResources {
		obj := g.object
		return &admissionregistrationv1.MatchResources{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: slices.Clone(nsReqs)},
			ObjectSelector:    obj.DeepCopy(),
		}
	}
	constraints := match()
	constraints.ResourceRules = []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		// CREATE, and the updates that can undo an enforced field (a Pod's resize and its
		// added ephemeral containers included); an update is refused only when it undoes
		// what the object held (notHeldBefore).
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: resources, Scope: ptr(admissionregistrationv1.NamespacedScope)},
	}}}
	gen.Policy = &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			// Fail: an error evaluating a validation denies, as the invariant is not shown.
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			// The selectors on the policy too: the API server then rejects an object before
			// it looks at the binding.
			MatchConstraints: constraints,
			MatchConditions:  conditions,
			Variables:        variables,
			Validations:      validations,
		},
	}
	bmeta := meta
	bmeta.Annotations = map[string]string{PolicyAnnotation: meta.Annotations[PolicyAnnotation]}
	gen.Binding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: bmeta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    match(),
		},
	}
	return gen
}
