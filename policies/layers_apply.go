package policies

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// One application of a selection of layers to the object as it came in (applyLayers), in named
// steps: what the object gives that the checks compare with, the platform's sidecars, the
// merge passes (merge.go), Kueue's placement put back, what the Kubernetes version keeps
// (versioneffects.go), the provenance, the coupled fields and the check, the JSONPatch.

// layerRun is one application of a selection of layers: the tree being patched, the merge's
// state, and what the steps hand each other.
type layerRun struct {
	// in, mode, manager and env are the evaluation's, copied: the run holds no pointer to it,
	// so that the evaluation stays on the stack.
	in      Input
	mode    mode
	manager profiles.Manager
	env     *validity.Env
	t       *jsontree.Tree
	obj     map[string]any
	l       layers
	st      applyState
	res     Result
	// given is what the object brought that the steps after the merge compare with.
	given given
	// owned are the platform's sidecars' names, which namespace policies' entries skip.
	owned map[string]bool
	// sidecarFields are, with Explain, the containers each policy inserted.
	sidecarFields map[*Policy][]string
}

// given is what an application reads of the object before the policies: the fields coupled to
// those they change, the placement Kueue decides, a Service's type where a policy writes it.
type given struct {
	coupled   validity.CoupledValues
	placement kueue.Placement
	// kueueMark is a namespace policy's Kueue mark on an enforced placement (namespaceKueueMark).
	kueueMark *validity.Violation
	// typeWritten: a policy writes a Service's spec.type, of which serviceType is the given.
	typeWritten bool
	serviceType string
}

// applyLayers applies one selection of layers to the object as it came in (d, when set, is it
// decoded already, patched in place), and returns the result and the labels of the patched
// object. The result carries the selection and the patched object's violations (reference §8),
// after the fields coupled to those the policies changed were adjusted.
func (e *evaluation) applyLayers(d *decoded, l layers) (Result, labels.Set, error) {
	if d == nil {
		dd := e.decode()
		d = &dd
	}
	r := layerRun{in: e.in, mode: e.mode, manager: e.sub.id.Manager, env: e.env, t: d.t, obj: d.obj, l: l, st: applyState{t: d.t, done: e.in.Done}}
	r.res = Result{Object: e.in.Object, Applied: l.all(), selection: l}
	// A Service's type can change only where a policy writes spec.type: only then is the type
	// as given read (it decodes the spec) and the coupled fields looked at.
	r.given.typeWritten = e.in.Kind == profiles.KindService && anyWrites(r.res.Applied, profiles.KindService, "type")
	if r.wholePod() {
		r.readGiven()
		r.insertSidecars()
	} else if r.given.typeWritten {
		r.given.serviceType = validity.ServiceType(r.t, r.obj)
	}
	r.merge()
	if r.st.stopped() {
		return Result{Object: e.in.Object}, nil, fmt.Errorf("%s not patched: %w", strings.ToLower(string(e.in.Kind)), r.st.err)
	}
	if r.wholePod() {
		r.keepKueue()
	}
	meta, _ := r.t.GetMap(r.obj, "metadata")
	labelsV, _ := r.t.Get(meta, "labels")
	patchedLabels := stringMap(labelsV)
	kube := versionEffectsOf(r.res.Applied, e.in.Kind, e.env.Lookups)
	r.provenance(kube)
	r.check(kube)
	if err := r.finish(); err != nil {
		return r.res, nil, err
	}
	r.res.labels = patchedLabels
	return r.res, patchedLabels, nil
}

// decode decodes the object as it came, for an application after the first.
func (e *evaluation) decode() decoded {
	t := jsontree.New()
	obj, _ := t.Decode(json.RawMessage(e.in.Object)).(map[string]any)
	if e.in.Explain {
		jsontree.ExpandAll(obj)
	}
	return decoded{t, obj}
}

// wholePod reports whether the object is a Pod whose every part the policies reach: not the
// ephemeral containers of an update alone.
func (r *layerRun) wholePod() bool {
	return r.in.Kind == profiles.KindPod && r.mode.ephemeral == nil
}

// readGiven reads what a Pod brings that the steps after the merge compare with.
func (r *layerRun) readGiven() {
	r.given.coupled.Read(r.t, r.obj)
	r.given.placement = kueue.Read(r.t, r.obj)
	r.given.kueueMark = namespaceKueueMark(&r.given.placement, r.l)
}

// insertSidecars inserts the platform's sidecars first, so that a namespace policy cannot claim
// their names; they are out of the namespace policies' reach, and replace a container of the
// same name the object brought (reference §3). The namespace's follow, then those kept below
// the others, replacing none.
func (r *layerRun) insertSidecars() {
	manager := r.manager
	m := newMerger(&r.st, profiles.KindPod, false)
	m.manager = manager
	explain := r.in.Explain
	placed := map[string]bool{}
	if explain {
		r.sidecarFields = map[*Policy][]string{}
	}
	insert := func(p *Policy, placed map[string]bool) {
		var before any
		if explain {
			before = deepCopy(r.obj)
		}
		m.insertSidecars(r.obj, p.Patch(profiles.KindPod), placed)
		if explain { // the containers it adds are its change too
			r.sidecarFields[p] = diffPaths(before, r.obj)
		}
	}
	l := r.l
	for _, p := range l.platform() {
		if slices.Contains(l.under, p) {
			continue // its containers are not the platform's: another policy's were kept
		}
		insert(p, placed)
		r.owned = sidecarNames(p.Patch(profiles.KindPod), r.owned, manager)
	}
	for _, p := range l.namespace() {
		if !slices.Contains(l.under, p) {
			insert(p, nil)
		}
	}
	for _, p := range l.under { // after every other policy's, replacing none
		insert(p, nil)
	}
}

// maxLayerReruns bounds how often merge applies the layers again to what they made, for a
// one-of group a later layer switched to a default's member (applyState.switched): once per
// level of one-of groups nested in each other, which policies do not go beyond.
const maxLayerReruns = 3

// merge runs the merge passes in layer order. Defaults sit below the object: they fill, highest
// precedence first, so the first to set a field wins; those keepValid kept below the others
// (layers.under) fill last, as their containers were inserted last.
func (r *layerRun) merge() {
	l := r.l
	namespaceDefault, platformDefault := l.namespaceDefault, l.platformDefault
	if len(l.under) > 0 {
		namespaceDefault, platformDefault = l.atPlace(namespaceDefault), l.atPlace(platformDefault)
	}
	stack := func() {
		r.pass(reversed(namespaceDefault), true, true)
		r.pass(reversed(platformDefault), true, false)
		for _, p := range l.under { // each below those kept before it
			r.pass([]*Policy{p}, true, p.Scope == ScopeNamespace)
		}
		r.pass(l.platformMerge, false, false)
		r.pass(l.namespaceMerge, false, true)
		r.pass(l.enforce, false, false)
	}
	stack()
	// A default's member of a one-of group (a volume's source) that yielded to another the
	// object held, and that a later layer then chose: a second admission would fill the
	// default's members under that choice. So the layers apply once more to what they made,
	// as that admission would (reference §3's fixed point); rare, and bounded.
	for range maxLayerReruns {
		if r.st.stopped() || !r.st.switched() {
			break
		}
		r.st.yields = r.st.yields[:0]
		stack()
	}
}

// pass merges the policies ps into the object, filling (defaults) or replacing; a namespace
// pass skips the platform's sidecars.
func (r *layerRun) pass(ps []*Policy, fill bool, namespace bool) {
	in := &r.in
	m := newMerger(&r.st, in.Kind, fill)
	m.manager = r.manager
	if namespace {
		m.owned = r.owned
	}
	ephemeral := r.mode.ephemeral
	for _, p := range ps {
		if r.st.stopped() {
			return
		}
		var before any
		if in.Explain {
			before = deepCopy(r.obj)
		}
		patch := p.Patch(in.Kind)
		if ephemeral != nil {
			patch = ephemeralPatch(patch, ephemeral)
		}
		m.mergeMap(r.obj, patch)
		if in.Explain {
			r.res.Changes = append(r.res.Changes, Change{Policy: p, Fields: slices.Concat(r.sidecarFields[p], diffPaths(before, r.obj))})
		}
	}
}

// The engine's policies say to kueue.Keep which of them enforce: with Kueue's flavors unknown,
// an enforce policy's placement is never left out of a Pod marked as Kueue's (reference §8,
// kueue-placement-conflict).
var _ kueue.Enforcer = (*Policy)(nil)

// Enforced reports whether the policy is an enforce policy (reference §2).
func (p *Policy) Enforced() bool { return p.Mode == ModeEnforce }

// keepKueue puts back the placement Kueue decides on the Pods it manages (reference §8,
// kueue-placement-conflict), each field a finding.
func (r *layerRun) keepKueue() {
	flavors, _ := r.env.Lookups.(kueue.Flavors) // nil: the keys are unknown
	if fs := kueue.Keep(r.t, r.obj, &r.given.placement, r.res.Applied, flavors); len(fs) > 0 {
		r.res.Findings = append(r.res.Findings, fs...)
		if r.in.Explain {
			r.res.Changes = dropRestored(r.res.Changes, r.in.Object, r.obj)
		}
	}
}

// provenance takes out of the object what the cluster's Kubernetes version does not keep, as
// its API server would, and names the applied policies in podpatch.io/applied — not one that
// set nothing else (reference §8: never claimed). An update leaves the provenance as it is.
func (r *layerRun) provenance(kube kubeEffects) {
	onlyDropped := kube.drop(r.obj, r.in.Kind, &r.res)
	if r.mode.update {
		return
	}
	refs := make([]string, 0, len(r.res.Applied))
	for _, p := range r.res.Applied {
		if !onlyDropped[p] {
			refs = append(refs, p.Ref)
		}
	}
	setAnnotation(r.t, r.obj, AppliedAnnotation, strings.Join(refs, ","))
}

// check adjusts the fields coupled to those the policies changed and checks the patched object
// (reference §8), the fields the version refuses and a namespace's Kueue mark among its
// violations.
func (r *layerRun) check(kube kubeEffects) {
	res, env, kind := &r.res, r.env, r.in.Kind
	switch {
	case r.mode.ephemeral != nil:
	case kind == profiles.KindPod:
		res.Adjusted = validity.Couple(r.t, r.obj, &r.given.coupled, func(member string) bool { return anySets(res.Applied, profiles.KindPod, member) }, env.Lookups)
	case kind == profiles.KindService && r.given.typeWritten:
		res.Adjusted = validity.CoupleService(r.t, r.obj, r.given.serviceType, func(member string) bool { return anySets(res.Applied, profiles.KindService, member) })
	}
	res.violations, _ = env.Check(r.obj)
	res.violations = append(res.violations, kube.refused()...)
	if kind == profiles.KindPod && slices.ContainsFunc(res.violations, func(v validity.Violation) bool { return v.Rule == validity.RuleExtendedResourceLimit }) {
		if adj := validity.EqualizeNonOvercommittable(r.t, r.obj); len(adj) > 0 {
			res.Adjusted = append(res.Adjusted, adj...)
			res.violations, _ = env.Check(r.obj)
		}
	}
	if r.given.kueueMark != nil {
		res.violations = append(res.violations, *r.given.kueueMark)
	}
}

// finish diffs the patched object into the JSONPatch and, unless only the patch is asked for,
// encodes it.
func (r *layerRun) finish() error {
	in, res := &r.in, &r.res
	if in.Explain {
		res.Changes = orderChanges(res.Changes, res.Applied)
	}
	var err error
	if res.Patch, err = jsontree.Diff(r.t, json.RawMessage(in.Object), r.obj); err != nil {
		return fmt.Errorf("diff %s: %w", strings.ToLower(string(in.Kind)), err)
	}
	res.Changed, res.patched = true, r.obj
	if r.mode.patchOnly {
		return nil
	}
	if res.Object, err = jsontree.Encode(r.obj); err != nil {
		return fmt.Errorf("encode %s: %w", strings.ToLower(string(in.Kind)), err)
	}
	return nil
}

// namespaceKueueMark is the violation of a selection in which a namespace policy sets a mark of
// Kueue's on a Pod that came without one, that no platform policy marks, and whose placement an
// enforce policy sets (reference §5): Kueue's marks make kueue.Keep hand placement to Kueue's
// flavors, so the mark would let a namespace policy take the enforced placement out. keepValid
// then leaves that namespace policy out, as one that broke a rule. Decided on the policies and
// the Pod as given, not on what Keep finds, so that the result's next admission, as unmarked,
// decides the same. nil otherwise.
func namespaceKueueMark(given *kueue.Placement, l layers) *validity.Violation {
	if given.Marked() || !slices.ContainsFunc(l.enforce, func(p *Policy) bool {
		return anyWrites([]*Policy{p}, profiles.KindPod, "nodeSelector") || anyWrites([]*Policy{p}, profiles.KindPod, "tolerations") ||
			anyWrites([]*Policy{p}, profiles.KindPod, "affinity")
	}) {
		return nil
	}
	for _, p := range l.platform() {
		if kueue.MarkWritten(p.Patch(profiles.KindPod)) != "" {
			return nil // the platform hands the Pod to Kueue
		}
	}
	for _, p := range l.namespace() {
		if field := kueue.MarkWritten(p.Patch(profiles.KindPod)); field != "" {
			return &validity.Violation{Rule: validity.ReasonKueueMark, Field: field,
				Message: "a mark of Kueue's on a Pod that came without one would hand the placement the platform's enforce policies set to Kueue"}
		}
	}
	return nil
}

func setAnnotation(t *jsontree.Tree, obj map[string]any, key, value string) {
	meta, ok := t.GetMap(obj, "metadata")
	if !ok {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	ann, ok := t.GetMap(meta, "annotations")
	if !ok {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[key] = value
}

// anyWrites reports whether a policy sets or removes (null) a member of the spec of objects of
// kind.
func anyWrites(ps []*Policy, kind profiles.Kind, member string) bool {
	for _, p := range ps {
		spec, _ := p.Patch(kind)["spec"].(map[string]any)
		if _, ok := spec[member]; ok {
			return true
		}
	}
	return false
}

// anySets reports whether a policy sets (not removes) a member of the spec of objects of kind.
func anySets(ps []*Policy, kind profiles.Kind, member string) bool {
	for _, p := range ps {
		spec, _ := p.Patch(kind)["spec"].(map[string]any)
		if spec[member] != nil {
			return true
		}
	}
	return false
}
