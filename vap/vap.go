// Package vap is podpatch's second line (reference §5, "The second line"): the platform's
// `mode: enforce` policies as ValidatingAdmissionPolicies the API server evaluates on the final
// object, after every mutating webhook ran, whether podpatch answered or not.
//
// Each enforce policy's part for a kind (Pod, Service) is stated as one validation per field it
// sets that CEL can state, and the fields it cannot are listed (Part). The parts are grouped so
// that an admission pays only for the objects that could select it, cheapest rejection first:
// one ValidatingAdmissionPolicy and binding per manager and role (a Pod's) or per label set the
// mutating webhook selects Services by, whose objectSelector (on the old object or the new, as
// the API server evaluates it) and namespaceSelector reject the other objects before any CEL
// runs; inside it, each policy's selection is a variable its validations are guarded by. The
// policies of a Pod's group that select every object of it share an object; those with a
// selection of their own go into small objects whose match condition is their selection, so
// that an admission pays the validations of the policies that could select it only (group.go).
// It is pure: a Set in, objects out;
// `podpatch vap` prints them and `serve --second-line` applies them (package secondline).
package vap

import (
	"fmt"
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
	// PolicyAnnotation names the podpatch policies an object states, one a line.
	PolicyAnnotation = "podpatch.io/policy"
	// NotCheckedAnnotation lists, one a line, the fields of those policies no validation
	// checks, each after its policy's name ("namespace/configmap/name: path (why)").
	NotCheckedAnnotation = "podpatch.io/not-checked"
)

// Defaults of Options.
const (
	// DefaultMaxValidations bounds the validations of one policy's part; the fields beyond
	// are listed as not checked.
	DefaultMaxValidations = 64
	// DefaultMaxExpression bounds one CEL expression's length in bytes; a longer one (a long
	// annotation value) is not generated and its field is listed as not checked.
	DefaultMaxExpression = 16 << 10
	// DefaultMaxGroupValidations and DefaultMaxGroupBytes bound one generated object: the
	// validations of the policies it states, and the bytes of their expressions (an object is
	// stored whole in etcd, whose requests are bounded at 1.5 MiB). A group beyond either is
	// split into several objects.
	DefaultMaxGroupValidations = 256
	DefaultMaxGroupBytes       = 512 << 10
	// maxAnnotation bounds the not-checked annotation; maxMessage one validation's message.
	maxAnnotation = 64 << 10
	maxMessage    = 1 << 10
)

// maxHeldBefore bounds the expression of a part's checks on the object before an update, in
// Options.MaxExpression (CEL parses at most 100,000 code points).
const maxHeldBefore = 4

// Options say what the generated bindings leave out and how large a policy may grow.
type Options struct {
	// ExcludedNamespaces are the namespaces the mutating webhook leaves out (its
	// namespaceSelector): the bindings leave them out too, since podpatch never patches there.
	ExcludedNamespaces []string
	// MaxValidations, MaxExpression, MaxGroupValidations, MaxGroupBytes: zero for the defaults.
	MaxValidations, MaxExpression, MaxGroupValidations, MaxGroupBytes int
}

// Part is what the second line states of one enforce policy for one kind: how many fields it
// checks and which it does not.
type Part struct {
	Ref        string // namespace/configmap/name
	Kind       profiles.Kind
	Checked    int
	NotChecked []string
}

// Generated is one ValidatingAdmissionPolicy and its binding, stating the parts of the
// policies it names for the objects of one group.
type Generated struct {
	Kind    profiles.Kind
	Policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// Parts are the policies it states, in policy order.
	Parts []Part
}

// Skipped is an enforce policy's part the second line does not state at all, and why.
type Skipped struct {
	Ref    string
	Kind   profiles.Kind
	Reason string
}

// Output is everything Generate gives: the objects in group order, the parts and the skipped
// parts in policy order.
type Output struct {
	Generated []Generated
	Parts     []Part
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
	if o.MaxGroupValidations <= 0 {
		o.MaxGroupValidations = DefaultMaxGroupValidations
	}
	if o.MaxGroupBytes <= 0 {
		o.MaxGroupBytes = DefaultMaxGroupBytes
	}
	var out Output
	var parts []*part
	platform := s.Policies(policies.ScopePlatform, platformNamespace)
	for _, p := range platform {
		if p.Mode != policies.ModeEnforce {
			continue
		}
		for _, k := range []profiles.Kind{profiles.KindPod, profiles.KindService} {
			patch := p.Patch(k)
			if patch == nil {
				continue
			}
			pt, err := compilePart(p, k, patch, o, alsoSet(platform, p))
			if err != nil {
				out.Skipped = append(out.Skipped, Skipped{Ref: ref(p), Kind: k, Reason: err.Error()})
				continue
			}
			parts = append(parts, pt)
			out.Parts = append(out.Parts, pt.Part)
		}
	}
	out.Generated = group(parts, o)
	return out
}

// ref names a policy in messages: its provenance without the resourceVersion, so that the
// generated objects change only when the policy does.
func ref(p *policies.Policy) string { return p.Namespace + "/" + p.ConfigMap + "/" + p.Name }

// alsoSet says, for p's container entry (list, name), which fields the other platform entries
// that reach that container set: every policy's "*" and "@main" entries of the list, and the
// other policies' entries of that name.
func alsoSet(platform []*policies.Policy, p *policies.Policy) func(list, name string) map[string]bool {
	return func(list, name string) map[string]bool {
		out := map[string]bool{}
		for _, q := range platform {
			spec, _ := q.Patch(profiles.KindPod)["spec"].(map[string]any)
			entries, _ := spec[list].([]any)
			for _, it := range entries {
				c, _ := it.(map[string]any)
				n, _ := c["name"].(string)
				if n != "*" && n != "@main" && (n != name || q == p) {
					continue
				}
				for f := range c {
					out[f] = true
				}
			}
		}
		return out
	}
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

// part is a policy's part compiled: its checks on the object and on the object before an
// update, and its selection, which group reads.
type part struct {
	Part
	policy *policies.Policy
	// validations are the checks, on the object, each with its message; heldBefore the
	// checks on the object before an update, joined ("" when too long for one expression).
	validations []admissionregistrationv1.Validation
	heldBefore  string
	// usesMain: a check reads the main container's name (of mainManager) from a variable.
	usesMain    bool
	mainManager profiles.Manager
	namespaces  []metav1.LabelSelectorRequirement
}

// compilePart states one policy's part for kind k, or says why it cannot.
func compilePart(p *policies.Policy, k profiles.Kind, patch map[string]any, o Options, also func(list, name string) map[string]bool) (*part, error) {
	// The selection is stated per group; a part none can state is not generated.
	for _, pr := range profiles.All() {
		for _, root := range []string{"object", "oldObject"} {
			expr, err := selects(p, k, pr, root)
			if err != nil {
				return nil, err
			}
			if len(expr) > o.MaxExpression {
				return nil, fmt.Errorf("its selection is longer than %d bytes", o.MaxExpression)
			}
		}
	}
	ns, err := namespaceRequirements(p)
	if err != nil {
		return nil, err
	}
	// The same checks twice: on the object, and on the object as it was before an update.
	walk := func(root string) *walker {
		w := &walker{typ: podType, root: root, alsoSet: also}
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
	pt := &part{Part: Part{Ref: r, Kind: k, NotChecked: w.notChecked}, policy: p, usesMain: w.usesMain, mainManager: w.mainManager, namespaces: ns}
	var held []string // the checks kept, on the object before the update
	for i, ch := range w.checks {
		switch {
		case len(ch.expression) > o.MaxExpression:
			pt.NotChecked = append(pt.NotChecked, ch.requires+" (its expression is longer than the bound)")
		case len(pt.validations) >= o.MaxValidations:
			pt.NotChecked = append(pt.NotChecked, ch.requires+" (beyond the bound of validations per policy)")
		default:
			pt.validations = append(pt.validations, admissionregistrationv1.Validation{
				Expression: ch.expression, Message: clip(requires(r, ch), maxMessage), Reason: ptr(metav1.StatusReasonInvalid)})
			held = append(held, "("+before.checks[i].expression+")")
		}
	}
	pt.Checked = len(pt.validations)
	if len(pt.validations) == 0 {
		return nil, fmt.Errorf("no field CEL can check: %s", strings.Join(pt.NotChecked, "; "))
	}
	// An update is held to the policy only when the object held every checked field before it,
	// as podpatch puts back only what an object held (reference §5, "Enforce on updates"): an
	// object admitted before the policy, or while podpatch was down, can still be updated. When
	// the checks on the old object are too long for one expression, no update is refused.
	pt.heldBefore = strings.Join(held, " && ")
	if len(pt.heldBefore) > maxHeldBefore*o.MaxExpression {
		pt.heldBefore = ""
		pt.NotChecked = append(pt.NotChecked, "updates (the checks on the object before an update are longer than the bound: no update is refused)")
	}
	return pt, nil
}

func ptr[T any](v T) *T { return &v }
