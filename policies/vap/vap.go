// Package vap is podpatch's second line (reference §5, "The second line"; issue 33): the
// platform's `mode: enforce` policies as ValidatingAdmissionPolicies the API server evaluates
// on the final object, after every mutating webhook ran, whether podpatch answered or not.
//
// Each enforce policy gives one ValidatingAdmissionPolicy and its binding per kind it patches
// (Pod, Service): the policy's selection (its managers' recognition, roles, selector, clusters,
// groups, namespaces) as match conditions and the binding's namespaceSelector, one validation per
// field it sets that CEL can state, and the fields it cannot in an annotation. It is pure: a
// Set in, objects out; `podpatch vap` prints them and `serve --second-line` applies them
// (package secondline).
package vap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/versions"
)

// Names the generated objects carry.
const (
	// ManagedByLabel with value ManagedBy marks the objects the second line owns: the sync
	// deletes those that no longer correspond to an enforce policy.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "podpatch"
	// PolicyAnnotation names the podpatch policy an object states.
	PolicyAnnotation = "podpatch.io/policy"
	// NotCheckedAnnotation lists, one a line, the fields of the policy no validation checks.
	NotCheckedAnnotation = "podpatch.io/not-checked"
)

// Defaults of Options.
const (
	// DefaultMaxValidations bounds the validations of one generated policy; the fields beyond
	// are listed as not checked.
	DefaultMaxValidations = 64
	// DefaultMaxExpression bounds one CEL expression's length in bytes; a longer one (a long
	// annotation value) is not generated and its field is listed as not checked.
	DefaultMaxExpression = 16 << 10
	// maxAnnotation bounds the not-checked annotation; maxMessage one validation's message.
	maxAnnotation = 16 << 10
	maxMessage    = 1 << 10
)

// notHeldBefore is the generated policies' variable that says a request is an update of an
// object that did not hold the policy's checked fields before it; its expression is bounded by
// maxHeldBefore times Options.MaxExpression (CEL parses at most 100,000 code points).
const (
	notHeldBefore = "notHeldBefore"
	maxHeldBefore = 4
)

// Options say what the generated bindings leave out and how large a policy may grow.
type Options struct {
	// ExcludedNamespaces are the namespaces the mutating webhook leaves out (its
	// namespaceSelector): the bindings leave them out too, since podpatch never patches there.
	ExcludedNamespaces []string
	// MaxValidations and MaxExpression: zero for the defaults.
	MaxValidations, MaxExpression int
}

// Generated is the second line of one enforce policy for one kind: the ValidatingAdmissionPolicy,
// its binding, and the fields it does not check.
type Generated struct {
	Ref        string // namespace/configmap/name
	Kind       profiles.Kind
	Policy     *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding    *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	Checked    int
	NotChecked []string
}

// Skipped is an enforce policy's part the second line does not state at all, and why.
type Skipped struct {
	Ref    string
	Kind   profiles.Kind
	Reason string
}

// Output is everything Generate gives, in policy order.
type Output struct {
	Generated []Generated
	Skipped   []Skipped
}

// Generate states every platform enforce policy of s as ValidatingAdmissionPolicies.
func Generate(s *policies.Set, platformNamespace string, o Options) Output {
	if o.MaxValidations <= 0 {
		o.MaxValidations = DefaultMaxValidations
	}
	if o.MaxExpression <= 0 {
		o.MaxExpression = DefaultMaxExpression
	}
	var out Output
	for _, p := range s.Policies(policies.ScopePlatform, platformNamespace) {
		if p.Mode != policies.ModeEnforce {
			continue
		}
		for _, k := range []profiles.Kind{profiles.KindPod, profiles.KindService} {
			patch := p.Patch(k)
			if patch == nil {
				continue
			}
			g, err := generate(p, k, patch, o)
			if err != nil {
				out.Skipped = append(out.Skipped, Skipped{Ref: ref(p), Kind: k, Reason: err.Error()})
				continue
			}
			out.Generated = append(out.Generated, g)
		}
	}
	return out
}

// ref names a policy in messages: its provenance without the resourceVersion, so that the
// generated objects change only when the policy does.
func ref(p *policies.Policy) string { return p.Namespace + "/" + p.ConfigMap + "/" + p.Name }

// Name is the generated objects' name for a policy's part: podpatch.<configmap>.<policy>.<kind>,
// with a hash in place of the tail when that exceeds a name's 253 bytes.
func Name(configMap, policy string, k profiles.Kind) string {
	n := "podpatch." + configMap + "." + policy + "." + strings.ToLower(string(k))
	if len(n) <= 253 {
		return n
	}
	h := sha256.Sum256([]byte(n))
	return n[:200] + "." + hex.EncodeToString(h[:8])
}

// withoutGated is a copy of a policy's part without the fields whose fate depends on the
// cluster's version and feature gates (versions.Fields): a cluster that drops one would
// store objects without it, and a check of it would refuse them all. They are not checked.
func withoutGated(patch map[string]any, k profiles.Kind, w *walker) map[string]any {
	var out map[string]any
	for _, f := range versions.Fields {
		if f.Kind != string(k) {
			continue
		}
		if !f.Set(patch) {
			continue
		}
		at, _ := versions.Find(patch, f.Path)
		if out == nil {
			c, _ := jsonCopy(patch).(map[string]any)
			out = c
		}
		w.skip(at, "kept or dropped depending on the cluster's Kubernetes version and feature gates")
		f.Strip(out)
	}
	if out == nil {
		return patch
	}
	return out
}

// jsonCopy copies a decoded JSON tree.
func jsonCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = jsonCopy(c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = jsonCopy(c)
		}
		return out
	}
	return v
}

func generate(p *policies.Policy, k profiles.Kind, patch map[string]any, o Options) (Generated, error) {
	sel, err := selectionOf(p, k)
	if err != nil {
		return Generated{}, err
	}
	for _, c := range sel.conditions {
		if len(c.expression) > o.MaxExpression {
			return Generated{}, fmt.Errorf("its selection's condition %s is longer than %d bytes", c.name, o.MaxExpression)
		}
	}
	// The same checks twice: on the object, and on the object as it was before an update.
	walk := func(root string) *walker {
		w := &walker{typ: podType, root: root}
		if k == profiles.KindService {
			w.typ = serviceType
		}
		if ms := p.Managers(); len(ms) == 1 {
			w.mainManager, w.mainOK = ms[0], true
		}
		w.part(withoutGated(patch, k, w))
		return w
	}
	w, before := walk("object"), walk("oldObject")
	r := ref(p)
	g := Generated{Ref: r, Kind: k, NotChecked: w.notChecked}
	var validations []admissionregistrationv1.Validation
	var held []string // the checks kept, on the object before the update
	for i, ch := range w.checks {
		switch {
		case len(ch.expression) > o.MaxExpression:
			g.NotChecked = append(g.NotChecked, ch.requires+" (its expression is longer than the bound)")
		case len(validations) >= o.MaxValidations:
			g.NotChecked = append(g.NotChecked, ch.requires+" (beyond the bound of validations per policy)")
		default:
			validations = append(validations, admissionregistrationv1.Validation{
				Expression: "(" + ch.expression + ") || variables." + notHeldBefore,
				Message:    clip(requires(r, ch), maxMessage), Reason: ptr(metav1.StatusReasonInvalid)})
			held = append(held, "("+before.checks[i].expression+")")
		}
	}
	g.Checked = len(validations)
	if len(validations) == 0 {
		return g, fmt.Errorf("no field CEL can check: %s", strings.Join(g.NotChecked, "; "))
	}
	// An update is held to the policy only when the object held every checked field before it,
	// as podpatch puts back only what an object held (reference §5, "Enforce on updates"): an
	// object admitted before the policy, or while podpatch was down, can still be updated. When
	// the checks on the old object are too long for one expression, no update is refused.
	heldBefore := `request.operation == "UPDATE" && !(` + strings.Join(held, " && ") + ")"
	if len(heldBefore) > maxHeldBefore*o.MaxExpression {
		heldBefore = `request.operation == "UPDATE"`
		g.NotChecked = append(g.NotChecked, "updates (the checks on the object before an update are longer than the bound: no update is refused)")
	}
	name := Name(p.ConfigMap, p.Name, k)
	meta := metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{ManagedByLabel: ManagedBy},
		Annotations: map[string]string{PolicyAnnotation: r},
	}
	if len(g.NotChecked) > 0 {
		meta.Annotations[NotCheckedAnnotation] = clip(strings.Join(g.NotChecked, "\n"), maxAnnotation)
	}
	resources := []string{"pods", "pods/resize", "pods/ephemeralcontainers"}
	if k == profiles.KindService {
		resources = []string{"services"}
	}
	var variables []admissionregistrationv1.Variable
	if w.usesMain {
		for _, root := range []string{"object", "oldObject"} {
			variables = append(variables, admissionregistrationv1.Variable{Name: mainVariable(root), Expression: mainName(w.mainManager, root)})
		}
	}
	variables = append(variables, admissionregistrationv1.Variable{Name: notHeldBefore, Expression: heldBefore})
	var conditions []admissionregistrationv1.MatchCondition
	for _, c := range sel.conditions {
		conditions = append(conditions, admissionregistrationv1.MatchCondition{Name: c.name, Expression: c.expression})
	}
	g.Policy = &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: meta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			// Fail: an error evaluating a validation denies, as the invariant is not shown.
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					// CREATE, and the updates that can undo an enforced field (a Pod's
					// resize and its added ephemeral containers included); an update is refused
					// only when it undoes what the object held (notHeldBefore).
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: resources, Scope: ptr(admissionregistrationv1.NamespacedScope)},
				}}},
			},
			MatchConditions: conditions,
			Variables:       variables,
			Validations:     validations,
		},
	}
	nsReqs := slices.Clone(sel.namespaces)
	if len(o.ExcludedNamespaces) > 0 {
		nsReqs = append(nsReqs, metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name",
			Operator: metav1.LabelSelectorOpNotIn, Values: slices.Sorted(slices.Values(o.ExcludedNamespaces))})
	}
	bmeta := meta
	bmeta.Annotations = map[string]string{PolicyAnnotation: r}
	g.Binding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: bmeta,
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: nsReqs},
				ObjectSelector:    &metav1.LabelSelector{},
			},
		},
	}
	return g, nil
}

func ptr[T any](v T) *T { return &v }
