package preview

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Input is one object to preview.
type Input struct {
	Kind profiles.Kind
	// JSON is the object: as the manager writes it (files), or as the API server returns it.
	JSON []byte
	// Namespace is the object's namespace when it has none (reference §10: --namespace, else
	// default).
	Namespace string
	// NamespaceLabels are its namespace's labels, for match.namespaceSelector.
	NamespaceLabels map[string]string
	// Lookups answers what the object references (policies.Input.Lookups); nil: unknown.
	Lookups validity.Lookups
	// Live says the object was read from the API server, so admitted under the base policies:
	// what the changed ConfigMaps' base policies put in it is taken out first (strip), so that
	// it is previewed as the manager will create it again.
	Live bool
}

// Object is what a change does to one object (reference §10).
type Object struct {
	Kind      profiles.Kind `json:"kind"`
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	// Group is the object's worker group, when its manager has groups.
	Group string `json:"group,omitempty"`
	// Fields are what changes, old → new, in the audit's paths and encoding; a side that
	// is absent has no value.
	Fields     []Field `json:"fields,omitempty"`
	MoreFields int     `json:"moreFields,omitempty"`
	// Started and Stopped are the policies (namespace/configmap/name) that start or stop applying.
	Started []string `json:"started,omitempty"`
	Stopped []string `json:"stopped,omitempty"`
	// NewFindings and ResolvedFindings are the §8 findings only the new, or only the old,
	// result has (the unschedulable check included).
	NewFindings      []checks.Finding `json:"newFindings,omitempty"`
	ResolvedFindings []checks.Finding `json:"resolvedFindings,omitempty"`
	// LeftOut are the policies the new set would leave out of the object because they would
	// make it invalid (reference §8), and why; LeftOutResolved those the base set leaves out
	// and the new one does not.
	LeftOut         []string `json:"leftOut,omitempty"`
	LeftOutResolved []string `json:"leftOutResolved,omitempty"`
	// NoEffect are the fields the new set's policies set that the cluster's Kubernetes version
	// drops (reference §8, policies/versions), and the old set's did not: "REF: FIELD has no
	// effect on Kubernetes 1.34: …".
	NoEffect []string `json:"noEffect,omitempty"`
	// Unschedulable says why the new Pod would have no place to run (its old one has).
	Unschedulable string `json:"unschedulable,omitempty"`
	// Move is where the Pod can run before and after the change, when the pools it fits
	// change or the change gives it constraints the placement model does not evaluate.
	Move *Move `json:"move,omitempty"`
	// Breaks is true when the change makes the object invalid (a policy left out), or
	// unschedulable, or brings an error finding.
	Breaks bool `json:"breaks"`

	identity profiles.Identity
}

// Move is where a Pod fits before and after the change: the pools (placement.PoolOf) of the
// Nodes it fits and of the Karpenter NodePools and GKE ComputeClasses that could create one,
// by the predicates of package placement. To empty: the Pod becomes unschedulable (Object's
// Unschedulable says why). NotModelled are the constraints of the new Pod the model does not
// evaluate (placement.Unmodelled): To are then the pools it may run in, not ones it will.
type Move struct {
	From []string `json:"from"`
	To   []string `json:"to"`
	// MoreFrom and MoreTo count the pools beyond the first placement.MaxPools.
	MoreFrom    int      `json:"moreFrom,omitempty"`
	MoreTo      int      `json:"moreTo,omitempty"`
	NotModelled []string `json:"notModelled,omitempty"`
}

// Moved says whether the pools change.
func (m *Move) Moved() bool {
	return m != nil && (m.MoreFrom != m.MoreTo || !slices.Equal(m.From, m.To))
}

// Field is one field that changes.
type Field struct {
	Path string `json:"path"`
	Old  any    `json:"old,omitempty"`
	New  any    `json:"new,omitempty"`
	// Uncertain: a changed merge or enforce policy set Old over whatever the manager wrote,
	// which the live object no longer shows; when the new set leaves the field to the
	// manager, New is that unknown value, shown as absent.
	Uncertain bool `json:"uncertain,omitempty"`
}

// related reports whether two paths are the same field or one lies inside the other.
func related(a, b string) bool {
	inside := func(x, y string) bool {
		return len(x) > len(y) && strings.HasPrefix(x, y) && (x[len(y)] == '.' || x[len(y)] == '[')
	}
	return a == b || inside(a, b) || inside(b, a)
}

// Previewer previews objects under two sets. It is not safe for concurrent use.
type Previewer struct {
	Sets
	// Placement, when set, is the cluster's Nodes and NodePools, for the unschedulable check.
	Placement *placement.Cache

	alone    map[*policies.Policy]*policies.Set
	sidecars map[*policies.Policy]map[string]bool
	parts    map[string]policyPart
	reserved map[string]bool
}

// objectMeta is what a preview reads of an object's metadata.
type objectMeta struct {
	Metadata struct {
		Name         string            `json:"name"`
		GenerateName string            `json:"generateName"`
		Namespace    string            `json:"namespace"`
		Annotations  map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// Object previews one object. ok is false when no profile recognises it, or neither set has a
// policy for it.
func (p *Previewer) Object(in Input) (Object, bool, error) {
	var meta objectMeta
	if err := json.Unmarshal(in.JSON, &meta); err != nil {
		return Object{}, false, fmt.Errorf("decode %s: %w", strings.ToLower(string(in.Kind)), err)
	}
	m := meta.Metadata
	ns := m.Namespace
	if ns == "" {
		ns = in.Namespace
	}
	name := m.Name
	if name == "" {
		name = m.GenerateName + "*"
	}
	where := func(err error) error {
		return fmt.Errorf("%s %s/%s: %w", strings.ToLower(string(in.Kind)), ns, name, err)
	}
	pin := policies.Input{Kind: in.Kind, Object: in.JSON, Namespace: ns, NamespaceLabels: in.NamespaceLabels, Lookups: in.Lookups}
	var overridden []Field
	if in.Live {
		// The base policies that admitted it, as its provenance says: all of them are taken
		// out, and applied again, so that the layers' order is that of a new object's.
		var admitted []*policies.Policy
		for _, e := range strings.Split(m.Annotations[policies.AppliedAnnotation], ",") {
			ref, _, _ := strings.Cut(strings.TrimSpace(e), "@")
			if q := p.admitting[ref]; q != nil && !slices.Contains(admitted, q) {
				admitted = append(admitted, q)
			}
		}
		if len(admitted) > 0 {
			var err error
			if pin.Object, overridden, err = p.strip(pin, admitted); err != nil {
				return Object{}, false, where(err)
			}
		}
	}
	old, err := p.Base.Apply(pin)
	if err != nil {
		return Object{}, false, where(err)
	}
	if !old.Recognised {
		return Object{}, false, nil
	}
	neu, err := p.New.Apply(pin)
	if err != nil {
		return Object{}, false, where(err)
	}
	if len(old.Applied)+len(old.Skipped)+len(neu.Applied)+len(neu.Skipped) == 0 {
		return Object{}, false, nil
	}
	o := Object{Kind: in.Kind, Namespace: ns, Name: name, Group: neu.Identity.Group, identity: neu.Identity}
	changes, err := objdiff.Compare(string(in.Kind), old.Object, neu.Object, policies.AppliedAnnotation)
	if err != nil {
		return Object{}, false, where(err)
	}
	var known []string // what the new set's merge and enforce policies set: known whatever the manager wrote
	if len(overridden) > 0 {
		explain := pin
		explain.Explain = true
		explained, err := p.New.Apply(explain)
		if err != nil {
			return Object{}, false, where(err)
		}
		for _, c := range explained.Changes {
			if c.Policy.Mode != policies.ModeDefault {
				known = append(known, c.Fields...)
			}
		}
	}
	for _, c := range changes {
		relatedTo := func(f Field) bool { return related(f.Path, c.Path) }
		o.Fields = append(o.Fields, Field{Path: c.Path, Old: c.Before, New: c.After,
			Uncertain: slices.ContainsFunc(overridden, relatedTo) && !slices.ContainsFunc(known, func(k string) bool { return related(k, c.Path) })})
	}
	// A value a changed merge or enforce policy set over the manager's, which the new set no
	// longer sets so, may change back to the manager's even where both sets agree here.
	for _, f := range overridden {
		relatedTo := func(p string) bool { return related(p, f.Path) }
		if slices.ContainsFunc(known, relatedTo) || slices.ContainsFunc(o.Fields, func(g Field) bool { return relatedTo(g.Path) }) {
			continue
		}
		o.Fields = append(o.Fields, Field{Path: f.Path, Old: f.Old, New: f.Old, Uncertain: true})
	}
	slices.SortStableFunc(o.Fields, func(a, b Field) int { return strings.Compare(a.Path, b.Path) })
	o.Started, o.Stopped = added(refs(old.Applied), refs(neu.Applied))
	o.LeftOutResolved, o.LeftOut = added(leftOut(neu.Skipped), leftOut(old.Skipped))
	_, o.NoEffect = added(noEffect(neu.NoEffect), noEffect(old.NoEffect))
	oldF, newF := findings(old.Findings), findings(neu.Findings)
	if in.Kind == profiles.KindPod && p.Placement != nil {
		if err := p.placement(&o, pin, old.Object, neu, &oldF, &newF); err != nil {
			return Object{}, false, where(err)
		}
	}
	o.NewFindings, o.ResolvedFindings = addedFindings(oldF, newF), addedFindings(newF, oldF)
	o.Breaks = len(o.LeftOut) > 0 || o.Unschedulable != ""
	for _, f := range o.NewFindings {
		o.Breaks = o.Breaks || f.Severity == checks.SeverityError
	}
	return o, true, nil
}

// Changed says whether the change does anything to the object.
func (o *Object) Changed() bool {
	return len(o.Fields)+len(o.Started)+len(o.Stopped)+len(o.NewFindings)+len(o.ResolvedFindings)+len(o.LeftOut)+len(o.LeftOutResolved)+len(o.NoEffect) > 0 || o.Move != nil
}

// placement runs the unschedulable check on the old and the new Pod, adds its findings, and
// says where the Pod moves.
func (p *Previewer) placement(o *Object, in policies.Input, old []byte, neu policies.Result, oldF, newF *[]checks.Finding) error {
	before, err := placement.Spec(old)
	if err != nil {
		return err
	}
	after, err := placement.Spec(neu.Object)
	if err != nil {
		return err
	}
	rb := p.Placement.Check(before)
	if !rb.Schedulable {
		*oldF = append(*oldF, findingOf(placement.Finding(rb, "")))
	}
	r := p.Placement.Check(after)
	if rb.Known && r.Known {
		// An unschedulable verdict of the modelled predicates is sure: what they leave out
		// can only refuse more (placement.Unmodelled).
		var notModelled []string
		if r.Schedulable {
			notModelled = placement.Unmodelled(after)
		}
		if !placement.SamePools(rb, r) || (len(notModelled) > 0 && !slices.Equal(notModelled, placement.Unmodelled(before))) {
			o.Move = &Move{From: nonNil(rb.Pools), To: nonNil(r.Pools), MoreFrom: rb.MorePools, MoreTo: r.MorePools, NotModelled: notModelled}
		}
	}
	if r.Schedulable {
		return nil
	}
	// Which policy set the placement: the new set again, explained (only for a stranded Pod).
	in.Explain = true
	explained, err := p.New.Apply(in)
	if err != nil {
		return err
	}
	f := findingOf(placement.Finding(r, placement.Responsible(explained.Changes)))
	*newF = append(*newF, f)
	if !slices.ContainsFunc(*oldF, func(g checks.Finding) bool { return g.Check == checks.Unschedulable }) {
		o.Unschedulable = r.Reason
	}
	return nil
}

// nonNil is l, or an empty list: no pool is [] in the report, not null.
func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func refs(ps []*policies.Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = refOf(p)
	}
	return out
}

func leftOut(sk []policies.Skipped) []string {
	out := make([]string, len(sk))
	for i, s := range sk {
		out[i] = refOf(s.Policy) + ": " + s.Violation.String()
		if s.Policy.Mode == policies.ModeEnforce { // reference §5: applied or denied
			out[i] = refOf(s.Policy) + " (enforce: admission denies the object): " + s.Violation.String()
		}
	}
	return out
}

func noEffect(ns []policies.NoEffect) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = refOf(n.Policy) + ": " + n.Field + " " + n.Message
	}
	return out
}

// added returns what only b has and what only a has, in their order.
func added(a, b []string) (onlyB, onlyA []string) {
	for _, x := range b {
		if !slices.Contains(a, x) {
			onlyB = append(onlyB, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			onlyA = append(onlyA, x)
		}
	}
	return onlyB, onlyA
}

// findingOf is a finding as `diff` reports it: the policy by its name, without its version.
func findingOf(f checks.Finding) checks.Finding {
	f.Policy, _, _ = strings.Cut(f.Policy, "@")
	return f
}

func findings(fs []checks.Finding) []checks.Finding {
	out := make([]checks.Finding, len(fs))
	for i, f := range fs {
		out[i] = findingOf(f)
	}
	return out
}

// addedFindings are the findings of b that a has not (by check, policy and field; the
// unschedulable check by itself: which policy it names may change, the Pod is still stranded).
func addedFindings(a, b []checks.Finding) []checks.Finding {
	var out []checks.Finding
	same := func(f, g checks.Finding) bool {
		return f.Check == g.Check && (f.Check == checks.Unschedulable || (g.Policy == f.Policy && g.Field == f.Field))
	}
	for _, f := range b {
		if !slices.ContainsFunc(a, func(g checks.Finding) bool { return same(f, g) }) {
			out = append(out, f)
		}
	}
	return out
}
