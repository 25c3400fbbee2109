// Package native compiles podpatch's policies into MutatingAdmissionPolicies (MAP,
// admissionregistration.k8s.io/v1 from Kubernetes 1.36, v1beta1 in 1.34 and 1.35): the API
// server applies them itself, so the policies they hold are applied while the webhook is down,
// and a cluster that forbids webhooks still gets them (docs/native.md).
//
// The compiled set is grouped so that a create pays only for the objects that could select
// it: one MAP per manager, role and kind, whose binding's objectSelector is the manager's
// recognition labels (the cheapest rejection, before any CEL runs), with each policy's own
// selection a CEL variable inside it and the six layers' precedence resolved here, when
// compiling (reference §3). A policy compiles whole or is left to the webhook, each field
// that keeps it there listed with the reason. It is pure: a Set in, objects out.
package native

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/celtext"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
)

// Labels the generated objects carry: ManagedByLabel with ManagedBy, and ComponentLabel with
// Component, so that a sync can find (and delete) what it no longer generates.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "podpatch"
	ComponentLabel = "app.kubernetes.io/component"
	Component      = "native"
)

// Defaults of Options.
const (
	// DefaultMaxExpression bounds one CEL expression in bytes: the API server's CEL parses at
	// most 100,000 code points, and a code point is at least one byte.
	DefaultMaxExpression = 64 << 10
	// DefaultMaxPolicy bounds the expressions of one generated MAP in bytes, well within the
	// API server's bound on an object (etcd's 1.5 MiB request).
	DefaultMaxPolicy = 512 << 10
	// maxAnnotations is the API server's bound on an object's annotations, keys and values in
	// bytes (reference §8, annotations-too-long).
	maxAnnotations = 256 << 10
)

// Options say what the bindings leave out and how large an expression and a MAP may grow.
type Options struct {
	// ExcludedNamespaces are the namespaces the mutating webhook leaves out (the platform
	// namespace among them): the bindings leave them out too.
	ExcludedNamespaces []string
	// MaxExpression and MaxPolicy: zero for the defaults.
	MaxExpression, MaxPolicy int
	// Minor is the Kubernetes minor version the MAPs are for (1.Minor); zero for 1.36 and
	// later. Kubernetes checks a new expression against the CEL libraries of the version
	// before its own, so 1.34 has no list library (flatten, sortBy): tolerations, required
	// node affinity and env variables, whose appends need it, are left to the webhook there.
	Minor int
}

// listsFrom is the first minor whose new CEL expressions have the list library.
const listsFrom = 35

// reasonLists is why a family that needs the list library stays with the webhook before listsFrom.
const reasonLists = "needs CEL's list library (flatten, sortBy), which Kubernetes checks new expressions against from 1.35"

// Group is the compiled MAP of one manager's role and kind, its binding, and the policies it
// holds in application order.
type Group struct {
	Manager profiles.Manager
	Role    profiles.Role
	Kind    profiles.Kind
	Policy  *admissionregistrationv1.MutatingAdmissionPolicy
	Binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	Refs    []string
}

// Compiled is a policy part that compiled, and where the MAPs leave it to the webhook all the
// same (Guards: objects on which admission might leave it out, which a MAP cannot tell).
type Compiled struct {
	Ref    string
	Kind   profiles.Kind
	Guards []string
}

// Left is a field of a policy part that keeps the part with the webhook, and why.
type Left struct {
	Ref    string
	Kind   profiles.Kind
	Field  string
	Reason string
}

// Output is everything Compile gives, each list in policy order.
type Output struct {
	Groups   []Group
	Compiled []Compiled
	Left     []Left
}

// Guards a compiled policy carries.
const (
	guardKueue        = "skipped on Pods that carry one of Kueue's marks: Kueue's deference on placement is the webhook's (reference §8, kueue-placement-conflict)"
	guardRuntimeClass = "skipped on Pods that name a RuntimeClass: whether its scheduling conflicts with the nodeSelector needs the RuntimeClass (reference §8)"
	guardAnnotations  = "skipped on Pods whose annotations leave no room for every annotation the group may add (reference §8, annotations-too-long)"
	guardLabelKeys    = "skipped on Pods whose pod (anti-)affinity terms or topology spread constraints name a label it sets in matchLabelKeys or mismatchLabelKeys: the API server merges the Pod's value into their selectors, which may then conflict (reference §8, pod-field-conflict)"
)

// Compile states every policy of s that compiles as MAPs, and lists the rest.
func Compile(s *policies.Set, platformNamespace string, o Options) Output {
	if o.MaxExpression <= 0 {
		o.MaxExpression = DefaultMaxExpression
	}
	if o.MaxPolicy <= 0 {
		o.MaxPolicy = DefaultMaxPolicy
	}
	all := slices.Clone(s.Policies(policies.ScopePlatform, platformNamespace))
	for _, ns := range s.Namespaces() {
		all = append(all, s.Policies(policies.ScopeNamespace, ns)...)
	}
	var out Output
	parts := map[*policies.Policy]podPart{}
	leave := func(p *policies.Policy, k profiles.Kind, field, reason string) {
		out.Left = append(out.Left, Left{Ref: ref(p), Kind: k, Field: field, Reason: reason})
		delete(parts, p)
	}
	// The labels any policy sets or removes: a selection that reads one depends on the
	// webhook's fixed point (reference §3), which a MAP, run once, does not reach.
	written := map[string]string{}
	for _, p := range all {
		if patch := p.Patch(profiles.KindPod); patch != nil {
			meta, _ := patch["metadata"].(map[string]any)
			lbls, _ := meta["labels"].(map[string]any)
			for k := range lbls {
				if _, ok := written[k]; !ok {
					written[k] = ref(p)
				}
			}
		}
	}
	for _, p := range all {
		if p.Patch(profiles.KindService) != nil {
			out.Left = append(out.Left, Left{Ref: ref(p), Kind: profiles.KindService, Field: "service",
				Reason: "Services are not compiled in this release: one is recognised by the labels of the Pods its selector selects"})
		}
		patch := p.Patch(profiles.KindPod)
		if patch == nil {
			continue
		}
		part, left := classify(patch)
		if o.Minor != 0 && o.Minor < listsFrom {
			for _, f := range part.needsLists() {
				left = append(left, leftField{f, reasonLists})
			}
		}
		compiles := len(left) == 0
		for _, l := range left {
			out.Left = append(out.Left, Left{Ref: ref(p), Kind: profiles.KindPod, Field: l.field, Reason: l.reason})
		}
		for _, k := range selectorKeys(p) {
			if by, ok := written[k]; ok {
				compiles = false
				out.Left = append(out.Left, Left{Ref: ref(p), Kind: profiles.KindPod, Field: "match.selector",
					Reason: fmt.Sprintf("reads label %s, which %s sets or removes: the selection then depends on the webhook's fixed point (reference §3)", k, by)})
			}
		}
		if _, err := selectionOf(p, profiles.All()[0]); err != nil {
			compiles = false
			out.Left = append(out.Left, Left{Ref: ref(p), Kind: profiles.KindPod, Field: "match", Reason: err.Error()})
		}
		if compiles {
			parts[p] = part
		}
	}
	leaveToWebhook := func(p *policies.Policy, field, reason string) { leave(p, profiles.KindPod, field, reason) }
	leaveConflicts(all, parts, leaveToWebhook)
	// Group, and take out what exceeds a bound, until every group fits.
	for range len(all) + 1 { // each round leaves at least one policy out
		groups, over := compileGroups(all, parts, o)
		if over == nil {
			out.Groups = groups
			break
		}
		for _, p := range over.ps {
			leaveToWebhook(p, over.field, over.reason)
		}
		leaveConflicts(all, parts, leaveToWebhook)
	}
	for _, p := range all {
		part, ok := parts[p]
		if !ok {
			continue
		}
		c := Compiled{Ref: ref(p), Kind: profiles.KindPod}
		if part.setsPlacement() {
			c.Guards = append(c.Guards, guardKueue)
		}
		if len(part.nodeSelector) > 0 {
			c.Guards = append(c.Guards, guardRuntimeClass)
		}
		if len(part.annotations) > 0 { // every group skips Pods without room for podpatch.io/applied
			c.Guards = append(c.Guards, guardAnnotations)
		}
		if len(part.setLabels()) > 0 {
			c.Guards = append(c.Guards, guardLabelKeys)
		}
		out.Compiled = append(out.Compiled, c)
	}
	slices.SortStableFunc(out.Left, func(a, b Left) int { return strings.Compare(a.Ref, b.Ref) })
	return out
}

// ref names a policy: its provenance entry, which the webhook writes into podpatch.io/applied
// (with the ConfigMap's resourceVersion when the policy was read from the cluster).
func ref(p *policies.Policy) string { return p.Ref }

// overBound are the policies a group could not hold within a bound: the later half of those
// that write the field beyond it (at least one), so that a set far beyond the bounds is
// compiled again a logarithmic number of times, not once per policy.
type overBound struct {
	ps            []*policies.Policy
	field, reason string
}

// compileGroups builds one MAP per manager and role for the compiled policies, or names a
// policy that takes a group beyond a bound.
func compileGroups(all []*policies.Policy, parts map[*policies.Policy]podPart, o Options) ([]Group, *overBound) {
	var groups []Group
	every := profiles.All()
	for i, pr := range every {
		for _, r := range profiles.Roles {
			if len(pr.RoleNames(r)) == 0 {
				continue
			}
			var in []*policies.Policy
			for _, p := range all {
				if _, ok := parts[p]; ok && selectsIn(p, pr.Manager, r) {
					in = append(in, p)
				}
			}
			if len(in) == 0 {
				continue
			}
			g, over := compileGroup(every, i, r, in, parts, o)
			if over != nil {
				return nil, over
			}
			groups = append(groups, g)
		}
	}
	return groups, nil
}

func compileGroup(every []profiles.Profile, i int, r profiles.Role, in []*policies.Policy, parts map[*policies.Policy]podPart, o Options) (Group, *overBound) {
	pr := every[i]
	var variables []admissionregistrationv1.Variable
	var ord order
	var layered [5][]*member // platform default, namespace default, platform merge, namespace merge, enforce
	byMember := map[*member]*policies.Policy{}
	placement, tolerating, mainUsed, labelling := false, false, false, false
	annotationBytes := len(policies.AppliedAnnotation)
	for n, p := range in {
		part := parts[p]
		selection, _ := selectionOf(p, pr) // stated before (Compile)
		guards := []string{selection}
		if part.setsPlacement() {
			guards, placement = append(guards, "!variables.kueueMarked"), true
		}
		if len(part.nodeSelector) > 0 {
			guards = append(guards, "!has(object.spec.runtimeClassName)")
		}
		if keys := part.setLabels(); len(keys) > 0 {
			guards, labelling = append(guards, "!variables."+labelKeysNamed+".exists(l, l.exists(k, k in "+celtext.Quotes(keys)+"))"), true
		}
		tolerating = tolerating || len(part.tolerations) > 0
		for _, e := range part.containers {
			mainUsed = mainUsed || e.name == "@main"
		}
		expr := and(guards)
		if len(expr) > o.MaxExpression {
			return Group{}, &overBound{[]*policies.Policy{p}, "match", fmt.Sprintf("its selection is longer than %d bytes of CEL", o.MaxExpression)}
		}
		name := fmt.Sprintf("p%d", n)
		variables = append(variables, admissionregistrationv1.Variable{Name: name, Expression: expr})
		m := &member{ref: ref(p), variable: "variables." + name, part: part, fill: p.Mode == policies.ModeDefault}
		byMember[m] = p
		layer := 4
		switch {
		case p.Mode == policies.ModeDefault && p.Scope == policies.ScopePlatform:
			layer = 0
		case p.Mode == policies.ModeDefault:
			layer = 1
		case p.Mode == policies.ModeMerge && p.Scope == policies.ScopePlatform:
			layer = 2
		case p.Mode == policies.ModeMerge:
			layer = 3
		}
		layered[layer] = append(layered[layer], m)
		annotationBytes += len(m.ref) + 1
		for k, v := range part.annotations {
			if v != nil {
				annotationBytes += len(k) + len(*v)
			}
		}
	}
	ord.fill = slices.Concat(reversed(layered[1]), reversed(layered[0]))
	ord.override = slices.Concat(layered[2], layered[3], layered[4])
	affinity, affinityVars := affinityPieces(ord)
	for _, v := range affinityVars {
		variables = append(variables, admissionregistrationv1.Variable{Name: v.name, Expression: v.expression})
	}
	var pieces [][]piece
	pieces = append(pieces,
		mapPieces("/metadata/labels", podLabels, func(p podPart) map[string]*string { return p.labels }, ord),
		mapPieces("/metadata/annotations", labelsOf("object.metadata.annotations"), func(p podPart) map[string]*string { return p.annotations }, ord),
		mapPieces("/spec/nodeSelector", labelsOf("object.spec.nodeSelector"), func(p podPart) map[string]*string { return p.nodeSelector }, ord),
		tolerationPieces(ord),
		affinity,
		envPieces(ord),
		[]piece{provenancePiece(slices.Concat(layered[:]...), policies.AppliedAnnotation)},
	)
	// The pieces, family after family, are packed into as few mutations as the expression
	// bound allows, mostly one: the API server applies each mutation in a pass of its own over
	// the object (docs/benchmarks/native.md). A list's operations apply in order, and a later
	// mutation sees what an earlier one made.
	var mutations []admissionregistrationv1.Mutation
	total := 0
	var cur []string
	size := 0
	flush := func() {
		if len(cur) > 0 {
			mutations = append(mutations, admissionregistrationv1.Mutation{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: strings.Join(cur, " + ")},
			})
		}
		cur, size = nil, 0
	}
	for _, family := range pieces {
		for _, pc := range family {
			if len(pc.expr) > o.MaxExpression {
				var ps []*policies.Policy
				for _, m := range pc.by[len(pc.by)/2:] {
					if !slices.Contains(ps, byMember[m]) {
						ps = append(ps, byMember[m])
					}
				}
				return Group{}, &overBound{ps, "template",
					fmt.Sprintf("a field it writes, with the other policies writing it, takes more than %d bytes of CEL", o.MaxExpression)}
			}
			if size+len(pc.expr)+3 > o.MaxExpression {
				flush()
			}
			cur, size = append(cur, pc.expr), size+len(pc.expr)+3
			total += len(pc.expr)
		}
	}
	flush()
	for _, v := range variables {
		total += len(v.Expression)
	}
	if total > o.MaxPolicy {
		return Group{}, &overBound{in[len(in)/2:], "template", fmt.Sprintf("its group (%s %s) would take more than %d bytes of CEL", pr.Manager, r, o.MaxPolicy)}
	}
	variables = append(sharedVariables(pr, variables), variables...)
	if mainUsed {
		variables = append([]admissionregistrationv1.Variable{{Name: mainName, Expression: mainNameExpression(pr.MainContainers)}}, variables...)
	}
	if placement {
		variables = append([]admissionregistrationv1.Variable{{Name: "kueueMarked", Expression: kueueMarked()}}, variables...)
	}
	if tolerating {
		variables = append([]admissionregistrationv1.Variable{{Name: tolerationIDs, Expression: tolerationIDsExpression}}, variables...)
	}
	if labelling {
		variables = append([]admissionregistrationv1.Variable{{Name: labelKeysNamed, Expression: labelKeysNamedExpression()}}, variables...)
	}
	var conditions []admissionregistrationv1.MatchCondition
	if c := firstProfile(every, i); c != "" {
		conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: "first-profile", Expression: c})
	}
	// Every group writes podpatch.io/applied: a Pod whose annotations leave no room for it and
	// the group's own is the webhook's, which leaves out what would not fit. A Pod without
	// annotations has room for all only when the group's fit the bound.
	conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: "annotations-room",
		Expression: fmt.Sprintf("(has(object.metadata.annotations) ? object.metadata.annotations.map(k, size(bytes(k)) + size(bytes(object.metadata.annotations[k]))).sum() : 0) <= %d",
			maxAnnotations-annotationBytes)})
	name := Name(pr.Manager, r, profiles.KindPod)
	meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedBy, ComponentLabel: Component}}
	g := Group{Manager: pr.Manager, Role: r, Kind: profiles.KindPod}
	for _, p := range in {
		g.Refs = append(g.Refs, ref(p))
	}
	g.Policy = &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			// Ignore, as the webhook's failurePolicy: an error leaves the object as it came,
			// and the second line's ValidatingAdmissionPolicies hold the enforce policies.
			FailurePolicy: ptr(admissionregistrationv1.Ignore),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					// Creations only: an update's enforce policies (reference §5, "Enforce on
					// updates") are the webhook's.
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: []string{"pods"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
				}}},
			},
			MatchConditions: conditions,
			Variables:       variables,
			Mutations:       mutations,
			// As the webhook's: admitted again when a later mutation changed the object; the
			// mutations give the same object twice.
			ReinvocationPolicy: admissionregistrationv1.IfNeededReinvocationPolicy,
		},
	}
	var nsReqs []metav1.LabelSelectorRequirement
	if len(o.ExcludedNamespaces) > 0 {
		nsReqs = append(nsReqs, metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name",
			Operator: metav1.LabelSelectorOpNotIn, Values: slices.Sorted(slices.Values(o.ExcludedNamespaces))})
	}
	g.Binding = &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName: name,
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: nsReqs},
				ObjectSelector:    objectSelector(pr, r),
			},
		},
	}
	return g, nil
}

// Name is a group's MAP and binding name: podpatch.<manager>.<role>.<kind>.
func Name(m profiles.Manager, r profiles.Role, k profiles.Kind) string {
	return "podpatch." + string(m) + "." + string(r) + "." + strings.ToLower(string(k))
}

// kueueMarked is `the Pod carries one of Kueue's marks` (policies/kueue: a label, or its
// admission or topology gate).
func kueueMarked() string {
	marks := []string{kueue.QueueLabel, kueue.ManagedLabel, kueue.PodSetLabel, kueue.PodGroupLabel,
		kueue.LocalQueueLabel, kueue.ClusterQueueLabel}
	return "(" + podLabels.present() + " && " + podLabels.String() + ".exists(k, k in " + celtext.Quotes(marks) + ")) || " +
		"(has(object.spec.schedulingGates) && object.spec.schedulingGates.exists(g, g.name in " +
		celtext.Quotes([]string{kueue.AdmissionGate, kueue.TopologyGate}) + "))"
}

// labelKeysNamed is the variable holding the label keys the Pod's pod (anti-)affinity terms and
// topology spread constraints name in matchLabelKeys or mismatchLabelKeys: the API server merges
// the Pod's label of such a key into the term's selector, and refuses a key the selector already
// has (ValidateMatchLabelKeysAndMismatchLabelKeys, ValidateMatchLabelKeysInTopologySpread), so a
// policy that sets one skips the Pod and leaves it to the webhook, which leaves the label out
// where it would conflict (policies/validity's labelKeys).
const labelKeysNamed = "labelKeysNamed"

// labelKeysNamedExpression states labelKeysNamed.
func labelKeysNamedExpression() string {
	keys := func(t string) string {
		return "(has(" + t + ".matchLabelKeys) ? " + t + ".matchLabelKeys : []) + (has(" + t + ".mismatchLabelKeys) ? " + t + ".mismatchLabelKeys : [])"
	}
	parts := []string{"(has(object.spec.topologySpreadConstraints) ? object.spec.topologySpreadConstraints.map(c, has(c.matchLabelKeys) ? c.matchLabelKeys : []) : [])"}
	for _, kind := range []string{"podAffinity", "podAntiAffinity"} {
		at := "object.spec.affinity." + kind
		held := "has(object.spec.affinity) && has(" + at + ") && has(" + at + "."
		parts = append(parts,
			"("+held+"requiredDuringSchedulingIgnoredDuringExecution) ? "+at+".requiredDuringSchedulingIgnoredDuringExecution.map(t, "+keys("t")+") : [])",
			"("+held+"preferredDuringSchedulingIgnoredDuringExecution) ? "+at+".preferredDuringSchedulingIgnoredDuringExecution.map(w, "+keys("w.podAffinityTerm")+") : [])")
	}
	return strings.Join(parts, " + ")
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

func ptr[T any](v T) *T { return &v }
