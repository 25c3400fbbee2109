package policies

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/internal/jsontree"
	"github.com/podpatch/podpatch/policies/kueue"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
)

// The merge stage (doc.go), the entry of every admission: recognise the object, select its
// policies, apply their layers (merge.go) to the fixed point of the labels they set, check the
// result (validity.go) and run the manager-aware checks on it.

// Apply patches one object with the matching policies of the set, in the layer order of
// reference §3, working on the raw JSON so that fields unknown to this build survive, and returns the
// patched object (and, with Input.Explain, what each policy changed): `podpatch render` and the
// audit. It is deterministic and idempotent: applying its result again gives the same object.
func (s *Set) Apply(in Input) (Result, error) { return s.apply(in, false) }

// Patch is Apply for the webhook: it returns only the JSONPatch (Result.Object stays the input),
// and trusts that Object is valid JSON, decoded once already with the review that carries it.
// It is the very same code path as Apply, so admission produces what `render` prints.
func (s *Set) Patch(in Input) (Result, error) {
	in.Explain = false
	return s.apply(in, true)
}

// apply is Apply, or Patch with patchOnly.
func (s *Set) apply(in Input, patchOnly bool) (Result, error) {
	res := Result{Object: in.Object}
	if !patchOnly && !json.Valid(in.Object) {
		return res, fmt.Errorf("decode %s: not valid JSON", strings.ToLower(string(in.Kind)))
	}
	t := jsontree.New()
	obj, ok := t.Decode(json.RawMessage(in.Object)).(map[string]any)
	if !ok {
		return res, fmt.Errorf("decode %s: expected a JSON object", strings.ToLower(string(in.Kind)))
	}
	if in.Explain {
		jsontree.ExpandAll(obj)
	}
	meta, _ := t.GetMap(obj, "metadata")
	// Decided on the very tree the policies are selected from (duplicate and differently cased
	// keys read as the merge reads them). An explicit null is no namespace.
	ns, _ := meta["namespace"].(string)
	if v, set := meta["namespace"]; in.NamespaceFromRequest && set && v != nil && v != "" && v != in.Namespace {
		s, _ := v.(string)
		if len(s) > 63 { // a namespace name is at most 63 bytes; the rest is not repeated
			s = s[:63] + "…"
		}
		return res, fmt.Errorf("%w: %q, not %q", ErrNamespaceMismatch, s, in.Namespace)
	}
	objLabels, id, recognised := recognise(t, obj, meta, in.Kind)
	if !recognised {
		return res, nil
	}
	res.Recognised, res.Identity = true, id
	if ns == "" {
		ns = in.Namespace
	}
	sub := &subject{id: id, kind: in.Kind, namespace: ns, labels: objLabels, namespaceLabels: in.NamespaceLabels}
	skip := objLabels[SkipLabel] == "true"
	l := s.selectLayers(sub, skip)
	keep := allLayers
	if in.enforceOnly {
		l, keep = l.enforceKept(in.keepEnforce), enforceKeep(in.keepEnforce)
	}
	if l.empty() {
		return res, nil
	}
	env := envOf(in, ns)
	a := &admission{in: in, patchOnly: patchOnly, skip: skip, res: res}
	// The first round patches the tree decoded here; any later one decodes the input afresh.
	out, err := s.admit(a, sub, env, l, keep, &decoded{t, obj})
	var unsettled, excluded bool
	if err == nil {
		unsettled, _ = s.unsettled(sub, skip, keep, out)
	}
	if unsettled {
		out, unsettled, excluded, err = s.settleSelection(a, sub, env, l, keep, out)
	}
	if in.readmitted {
		return out, err // for readmit: the result with its tree, without the checks
	}
	if err == nil && !out.Denied && !in.enforceOnly && in.ephemeral == nil &&
		(unsettled || excluded || len(out.Skipped) > 0 || len(out.selection.under) > 0 || out.Fallback == FallbackNamespace) {
		// Policies were left out for the result's validity or what their labels select, kept
		// below the others, or the namespace's left out as a whole: decided on the object as it
		// came. A second admission reads the result as the object's own, on which such a
		// policy may be harmless (the field or label it sets already there, another policy's
		// value that made it invalid now the object's), and the policies kept may then order
		// differently: the decisions are not always a fixed point. The result is admitted
		// again, as the API server's reinvocation would, until that changes nothing (readmit);
		// most such results are a fixed point already, and the second admission only confirms
		// it. Only objects with policies left out pay for it.
		out = s.readmit(in, patchOnly, out)
	}
	if err != nil {
		return res, err
	}
	// The manager-aware checks (reference §8), on the very result the webhook and render return.
	// Kueue's placement findings came first (applyLayers); at most MaxFindings in all.
	out.Findings = append(out.Findings, checks.Run(in.Kind, id, in.Object, out.patched, out.Applied)...)
	if len(out.Findings) > checks.MaxFindings {
		out.Findings = out.Findings[:checks.MaxFindings]
	}
	out.violations, out.selection, out.patched, out.labels = nil, layers{}, nil, nil
	out.Recognised, out.Identity = true, id
	return out, nil
}

// admission is what every selection of one admission shares (Set.admit).
type admission struct {
	in        Input
	patchOnly bool
	skip      bool
	res       Result // the object unpatched, recognised
}

// admit is one admission of the selection l, keep restricting every selection after it: the
// fixed point of the labels policies set, the platform's enforce policies kept selected, the
// fallbacks that leave layers out, and the result kept valid. first, when set, is the input
// already decoded, patched in place.
func (s *Set) admit(a *admission, sub *subject, env *validity.Env, l layers, keep func(*layers) layers, first *decoded) (Result, error) {
	in, patchOnly, skip, res := a.in, a.patchOnly, a.skip, a.res
	// Enforce has the last word (reference §3, §5, §8): whatever leaves the other layers out
	// (the platform's selectors contradicting each other, the bound of work, the request budget),
	// the platform's enforce policies apply alone, in the budget reserved for them — or the
	// object is denied, never admitted without them.
	hard := in
	if in.EnforceDone != nil {
		hard.Done = in.EnforceDone
	}
	// Valid in, valid out (reference §8): leave out what would make the object invalid; an
	// enforce policy that cannot be kept denies it.
	valid := func(in Input, out Result) (Result, error) {
		return keepValid(in, env, out.selection, out, func(l layers) (Result, error) {
			res, _, err := s.applyLayers(in, patchOnly, nil, sub.id.Manager, l, env)
			return res, err
		})
	}
	out, err := s.fixedPoint(in, patchOnly, first, sub, skip, l, keep, env)
	var switchedOff []Skipped // namespace policies left out for the labels they set
	if err == nil {
		out, switchedOff = s.keepEnforceSelected(in, patchOnly, sub, skip, l, keep, out, env)
	}
	if err != nil && !errors.Is(err, ErrStopped) && l.hasNamespace() {
		// A namespace policy must never switch the platform's policies off: without them.
		platform := l.platformOnly()
		if platform.empty() {
			return res, err
		}
		pout, perr := s.fixedPoint(in, patchOnly, nil, sub, skip, platform, platformOnly(keep), env)
		if perr == nil {
			pout.Warnings = append(pout.Warnings, "namespace policies left out: "+err.Error())
			pout.Fallback = FallbackNamespace
			out, err = pout, nil
		} else {
			err = perr // the platform's own: left to the enforce fallback below
		}
	}
	enforceAlone := func(cause error) (Result, error) {
		eout, err := s.enforceOnly(hard, patchOnly, sub, skip, l, env)
		if err != nil {
			return denied(res, l.enforce, err), nil
		}
		fallback, why := FallbackEnforceFirst, cause.Error()
		if errors.Is(cause, ErrSelectionDiverges) {
			fallback, why = FallbackEnforceOnly, fmt.Sprintf("%v for more than %d rounds (their selectors contradict each other; podpatch lint names them)",
				ErrSelectionDiverges, MaxSelectionRounds)
		}
		eout.Warnings = append(eout.Warnings, "only the platform's enforce policies applied, default and merge policies left out: "+why)
		eout.Fallback = fallback
		return valid(hard, eout)
	}
	switch {
	case err != nil && len(l.enforce) > 0:
		out, err = enforceAlone(err)
	case err == nil:
		selected := out.selection
		out, err = valid(in, out)
		if err == nil && out.Denied && in.EnforceDone != nil && enforceOutOfTime(out.Skipped) {
			// The budget of every layer ran out before the enforce policies were checked:
			// they have the reserved one.
			out, err = enforceAlone(fmt.Errorf("%s not patched: %w", strings.ToLower(string(in.Kind)), ErrStopped))
		}
		if err == nil && out.Denied && selected.hasNamespace() && !enforceOutOfTime(out.Skipped) {
			out = s.withoutNamespace(in, patchOnly, sub, skip, l, selected, keep, out, env, valid)
		}
		if out.Fallback != FallbackNamespace { // else every namespace policy is left out already
			out.Skipped = append(out.Skipped, switchedOff...)
		}
	}
	return out, err
}

// settleSelection is for an admission out of the selection l whose result's labels select
// other policies than those it came from (unsettled). A policy left out for the validity of
// the result (keepValid) whose labels took part in the selection: without them the result's
// labels may select other policies than those the admission applied, and a second admission,
// which reads those labels as the object's own, would apply them (reference §3's fixed
// point). The selection is then sought again without the policies so left out, which stay
// left out, until the result's labels select what it applied. It returns the result, whether
// its labels still select otherwise, whether policies were so left out, and the error.
func (s *Set) settleSelection(a *admission, sub *subject, env *validity.Env, l layers, keep func(*layers) layers, out Result) (Result, bool, bool, error) {
	excluded := map[*Policy]bool{}
	var carried []Skipped // the excluded policies, and why each was left out
	var err error
	unsettled := true
	for range MaxSelectionRounds {
		var writers []*Policy
		if unsettled, writers = s.unsettled(sub, a.skip, keep, out); len(writers) == 0 {
			break
		}
		before, held := out, len(carried)
		for _, sk := range out.Skipped {
			if slices.Contains(writers, sk.Policy) {
				excluded[sk.Policy] = true
				carried = append(carried, sk)
			}
		}
		prev := keep
		keep = func(x *layers) layers { y := prev(x); return y.without(excluded) }
		if out, err = s.admit(a, sub, env, keep(&l), keep, nil); err != nil {
			return out, false, len(carried) > 0, err
		}
		if slices.ContainsFunc(before.Applied, func(p *Policy) bool { return p.Mode == ModeEnforce && !slices.Contains(out.Applied, p) }) {
			// Their labels selected an enforce policy the object applied: without them it is
			// not selected. The platform's own selection: the result stands (readmit settles
			// it, as the API server's reinvocation would).
			out, carried = before, carried[:held]
			break
		}
	}
	if len(carried) > 0 {
		out.Skipped = append(out.Skipped, carried...)
		all := l.all() // in application order
		slices.SortStableFunc(out.Skipped, func(a, b Skipped) int {
			return cmp.Compare(slices.Index(all, a.Policy), slices.Index(all, b.Policy))
		})
	}
	return out, unsettled, len(carried) > 0, nil
}

// recognise reads an object's labels (and a Service's selector) and recognises it by them.
func recognise(t *jsontree.Tree, obj, meta map[string]any, kind profiles.Kind) (labels.Set, profiles.Identity, bool) {
	labelsV, _ := t.Get(meta, "labels")
	objLabels := stringMap(labelsV)
	var selector map[string]string
	if kind == profiles.KindService {
		spec, _ := t.GetMap(obj, "spec")
		selectorV, _ := t.Get(spec, "selector")
		selector = stringMap(selectorV)
	}
	id, ok := profiles.Recognise(kind, objLabels, selector)
	return objLabels, id, ok
}

// keepEnforceSelected makes sure that no namespace policy switches off, by the labels it sets
// or removes, an enforce policy that the object as given selects (reference §5, issue 38). out
// is the fixed point of the selection l (the object's as given); when its selection lacks an
// enforce policy of l and namespace policies set labels, the fixed point is sought again
// without those namespace policies, and if it then keeps every enforce policy of l, that is
// the result and they are left out, each with the label and the enforce policy it would have
// switched off. (Keeping the enforce policy selected while the namespace's label stays would
// not be idempotent: the next admission of the result reads that label as given.) When the
// platform's own policies switch the enforce policy off, out stands. It costs another fixed
// point only when an enforce policy was switched off.
func (s *Set) keepEnforceSelected(in Input, patchOnly bool, sub *subject, skip bool, l layers, keep func(*layers) layers, out Result, env *validity.Env) (Result, []Skipped) {
	lost := func(sel layers) []*Policy {
		return slices.DeleteFunc(slices.Clone(l.enforce), func(p *Policy) bool { return slices.Contains(sel.enforce, p) })
	}
	off := lost(out.selection)
	if len(off) == 0 {
		return out, nil
	}
	drop := map[*Policy]bool{}
	for _, ps := range [][]*Policy{l.namespace(), out.selection.namespace()} {
		for _, p := range ps {
			if setsLabels(p, in.Kind) {
				drop[p] = true
			}
		}
	}
	if len(drop) == 0 {
		return out, nil
	}
	without := func(x *layers) layers {
		y := keep(x)
		f := func(ps []*Policy) []*Policy {
			return slices.DeleteFunc(slices.Clone(ps), func(p *Policy) bool { return drop[p] })
		}
		y.namespaceDefault, y.namespaceMerge = f(y.namespaceDefault), f(y.namespaceMerge)
		return y
	}
	given := l // taken apart from l, which the common path keeps on the stack
	again, err := s.fixedPoint(in, patchOnly, nil, sub, skip, without(&given), without, env)
	if err != nil || len(lost(again.selection)) > 0 {
		return out, nil // not the namespace's doing
	}
	var left []Skipped
	for _, ps := range [][]*Policy{l.namespace(), out.selection.namespace()} {
		for _, p := range ps {
			if drop[p] && !slices.ContainsFunc(left, func(sk Skipped) bool { return sk.Policy == p }) {
				left = append(left, Skipped{Policy: p, Violation: switchesOff(p, in.Kind, off)})
			}
		}
	}
	return again, left
}

// switchesOff is the violation of a namespace policy whose labels switch off one of the enforce
// policies: the first label it writes that one of their selectors reads.
func switchesOff(p *Policy, kind profiles.Kind, off []*Policy) validity.Violation {
	meta, _ := p.Patch(kind)["metadata"].(map[string]any)
	written, _ := meta["labels"].(map[string]any)
	for _, e := range off {
		if e.match.selector == nil {
			continue
		}
		reqs, _ := e.match.selector.Requirements()
		for _, r := range reqs {
			if _, ok := written[r.Key()]; ok {
				return validity.Violation{Rule: validity.RuleSelection, Field: "metadata.labels[" + r.Key() + "]",
					Message: "sets or removes a label the match of the platform's enforce policy " + e.Ref + " reads, which would switch it off"}
			}
		}
	}
	return validity.Violation{Rule: validity.RuleSelection, Field: "metadata.labels",
		Message: "sets labels that would switch off the platform's enforce policy " + off[0].Ref}
}

// withoutNamespace is the answer to an object denied with namespace policies selected
// (reference §5, issue 38: a namespace policy never decides a denial): the platform's policies
// are applied alone, and when they admit the object, that is the result, each namespace policy
// left out with the violation of the enforce policy it made impossible. Whatever route a
// namespace policy takes to it (the labels it sets selecting an enforce policy the object
// cannot keep, a value keepValid's order cannot tell apart), the object is denied only when
// the platform's policies alone deny it. It costs a platform-only apply, and only on a denial.
func (s *Set) withoutNamespace(in Input, patchOnly bool, sub *subject, skip bool, l, selected layers, keep func(*layers) layers, out Result, env *validity.Env, valid func(Input, Result) (Result, error)) Result {
	pout, err := s.fixedPoint(in, patchOnly, nil, sub, skip, l.platformOnly(), platformOnly(keep), env)
	if err != nil {
		return out
	}
	if pout, err = valid(in, pout); err != nil || pout.Denied {
		return out // the platform's own denial
	}
	i := slices.IndexFunc(out.Skipped, func(sk Skipped) bool { return sk.Policy.Mode == ModeEnforce })
	if i < 0 {
		return out
	}
	cause := out.Skipped[i]
	for _, p := range selected.namespace() {
		v := cause.Violation
		v.Message = "with the namespace's policies the platform's enforce policy " + cause.Policy.Ref + " cannot be kept: " + v.Message
		pout.Skipped = append(pout.Skipped, Skipped{Policy: p, Violation: v})
	}
	pout.Warnings = append(pout.Warnings, "namespace policies left out: with them the platform's enforce policy "+cause.Policy.Ref+" cannot be kept")
	pout.Fallback = FallbackNamespace
	return pout
}

// platformOnly is keep, without namespace policies, for fixedPoint's every selection.
func platformOnly(keep func(*layers) layers) func(*layers) layers {
	return func(l *layers) layers { y := keep(l); return y.platformOnly() }
}

// unsettled reports whether the labels of out's object select other policies than the
// selection out came from (those it applied and those it left out), when out left policies out
// or kept defaults below the others (keepValid, keepEnforceSelected): then the admission is not
// yet a fixed point (reference §3). writers are the policies it left out that set labels.
// Nothing when out fell back on fewer layers or was denied.
func (s *Set) unsettled(sub *subject, skip bool, keep func(*layers) layers, out Result) (bool, []*Policy) {
	if out.Denied || out.Fallback != FallbackNone || len(out.Skipped)+len(out.selection.under) == 0 {
		return false, nil
	}
	var writers []*Policy
	for _, sk := range out.Skipped {
		if setsLabels(sk.Policy, sub.kind) {
			writers = append(writers, sk.Policy)
		}
	}
	if len(writers) == 0 && !slices.ContainsFunc(out.selection.under, func(p *Policy) bool { return setsLabels(p, sub.kind) }) {
		return false, nil // the labels are those the selection was made with
	}
	next := s.selectLayers(&subject{id: sub.id, kind: sub.kind, namespace: sub.namespace, labels: out.labels, namespaceLabels: sub.namespaceLabels}, skip)
	next = keep(&next)
	came := make([]*Policy, 0, len(out.Applied)+len(out.Skipped))
	came = append(came, out.Applied...)
	for _, sk := range out.Skipped {
		came = append(came, sk.Policy)
	}
	selected := next.all()
	if len(selected) == len(came) && !slices.ContainsFunc(selected, func(p *Policy) bool { return !slices.Contains(came, p) }) {
		return false, nil
	}
	return true, writers
}

// maxReadmissions bounds readmit.
const maxReadmissions = 3

// readmit admits out's object again, as the API server's reinvocation would, until that
// changes nothing (at most maxReadmissions times), and returns what the last admission made of
// it, said against the object as it came (in): its Patch, the policies it applied, its warnings
// and fallback, what the admissions left out that it neither applied nor left out, and what
// they changed. When an admission fails or is denied, out stands.
func (s *Set) readmit(in Input, patchOnly bool, out Result) Result {
	for range maxReadmissions {
		cur, err := jsontree.Encode(out.patched)
		if err != nil {
			return out
		}
		again := in
		again.Object, again.readmitted = cur, true
		r, err := s.apply(again, patchOnly)
		if err != nil || r.Denied || r.patched == nil {
			return out
		}
		if !hasOps(r.Patch) {
			return out
		}
		if cur, err = jsontree.Encode(r.patched); err != nil {
			return out
		}
		t := jsontree.New()
		tree := t.Decode(json.RawMessage(cur))
		jsontree.ExpandAll(tree)
		patch, err := jsontree.Diff(t, json.RawMessage(in.Object), tree)
		if err != nil {
			return out
		}
		next := r
		next.Object, next.Patch = in.Object, patch
		if !patchOnly {
			next.Object = cur
		}
		for _, sk := range out.Skipped {
			if !slices.Contains(r.Applied, sk.Policy) && !slices.ContainsFunc(r.Skipped, func(q Skipped) bool { return q.Policy == sk.Policy }) {
				next.Skipped = append(next.Skipped, sk)
			}
		}
		next.NoEffect = union(out.NoEffect, r.NoEffect)
		next.Adjusted = union(out.Adjusted, r.Adjusted)
		next.Findings = union(out.Findings, r.Findings)
		if in.Explain {
			next.Changes = orderChanges(append(slices.Clone(out.Changes), r.Changes...), r.Applied)
		}
		out = next
	}
	return out
}

// union is a followed by the items of b it lacks.
func union[T comparable](a, b []T) []T {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// enforceOnly applies the enforce layer alone, for an object the other layers cannot patch: to
// its own fixed point when the enforce policies' selection converges, else the enforce
// policies selected on the object as it came in, once.
func (s *Set) enforceOnly(in Input, patchOnly bool, sub *subject, skip bool, l layers, env *validity.Env) (Result, error) {
	enforce := l.enforceKept(in.keepEnforce)
	out, err := s.fixedPoint(in, patchOnly, nil, sub, skip, enforce, enforceKeep(in.keepEnforce), env)
	if errors.Is(err, ErrSelectionDiverges) {
		out, _, err = s.applyLayers(in, patchOnly, nil, sub.id.Manager, enforce, env)
	}
	return out, err
}

// enforceKeep is enforceKept for fixedPoint's every selection.
func enforceKeep(keep func(*Policy) bool) func(*layers) layers {
	if keep == nil {
		return (*layers).enforceOnly
	}
	return func(l *layers) layers { return l.enforceKept(keep) }
}

// enforceOutOfTime reports whether an enforce policy was left out because the budget ran out.
func enforceOutOfTime(skipped []Skipped) bool {
	return slices.ContainsFunc(skipped, func(sk Skipped) bool {
		return sk.Policy.Mode == ModeEnforce && sk.Violation.Rule == validity.RuleBudget
	})
}

// denied is the Result of an object whose enforce policies cannot be applied for err: nothing
// applied, each enforce policy skipped for the reason err names (reference §5).
func denied(res Result, enforce []*Policy, err error) Result {
	rule := validity.RuleWork
	switch {
	case errors.Is(err, ErrStopped):
		rule = validity.RuleBudget
	case errors.Is(err, ErrSelectionDiverges):
		rule = validity.RuleSelection
	}
	v := validity.Violation{Rule: rule, Message: err.Error()}
	for _, p := range enforce {
		res.Skipped = append(res.Skipped, Skipped{Policy: p, Violation: v})
	}
	res.Denied = true
	return res
}

// allLayers keeps every layer of a selection, for fixedPoint.
func allLayers(l *layers) layers { return *l }

// MaxSelectionRounds bounds how often one admission re-selects policies because labels that
// policies set make other policies' selectors match (or stop matching).
const MaxSelectionRounds = 4

// fixedPoint applies the layers and, while the labels they set change which policies match,
// selects again and applies the new selection to the object as it came in, so that a second
// admission of the result selects the same policies and changes nothing. Beyond
// MaxSelectionRounds the selection oscillates: the object is not patched (Apply then tries
// without namespace policies, then the enforce layer alone). keep restricts every selection to
// the layers of such a fallback.
func (s *Set) fixedPoint(in Input, patchOnly bool, first *decoded, sub *subject, skip bool, l layers, keep func(*layers) layers, env *validity.Env) (Result, error) {
	selected := sub.labels // the labels l was selected with
	for round := 1; ; round++ {
		res, labels, err := s.applyLayers(in, patchOnly, first, sub.id.Manager, l, env)
		first = nil
		if err != nil || (round == 1 && !l.any(func(p *Policy) bool { return setsLabels(p, in.Kind) })) {
			// Without labels set by policies, the first selection cannot change. A later one
			// that sets none leaves the object's own labels, which select the first selection
			// again: selectionReads compares the labels this one was selected with.
			return res, err
		}
		if !s.selectionReads(sub, selected, labels) {
			return res, nil // nor when no selector reads the labels they changed
		}
		next := s.selectLayers(&subject{id: sub.id, kind: sub.kind, namespace: sub.namespace, labels: labels, namespaceLabels: sub.namespaceLabels}, skip)
		next = keep(&next)
		if next.equal(l) {
			return res, nil
		}
		if round == MaxSelectionRounds {
			return Result{Object: in.Object}, fmt.Errorf("%s not patched: %w for more than %d rounds (their selectors contradict each other)",
				strings.ToLower(string(in.Kind)), ErrSelectionDiverges, MaxSelectionRounds)
		}
		l, selected = next, labels
	}
}

// setsLabels reports whether a policy sets or removes a label of a kind of object.
func setsLabels(p *Policy, kind profiles.Kind) bool {
	meta, ok := p.Patch(kind)["metadata"].(map[string]any)
	return ok && meta["labels"] != nil
}

// maxLayerReruns bounds how often applyLayers applies the layers again to what they made, for
// a one-of group a later layer switched to a default's member (applyState.switched): once per
// level of one-of groups nested in each other, which policies do not go beyond.
const maxLayerReruns = 3

// decoded is the input object in a tree, ready to be patched once.
type decoded struct {
	t   *jsontree.Tree
	obj map[string]any
}

// applyLayers applies one selection of layers to the object as it came in, and returns the
// result and the labels of the patched object. The result carries the selection and the patched
// object's violations (reference §8), after the fields coupled to those the policies changed were
// adjusted.
func (s *Set) applyLayers(in Input, patchOnly bool, d *decoded, manager profiles.Manager, l layers, env *validity.Env) (Result, labels.Set, error) {
	res := Result{Object: in.Object}
	if d == nil {
		t := jsontree.New()
		obj, _ := t.Decode(json.RawMessage(in.Object)).(map[string]any)
		if in.Explain {
			jsontree.ExpandAll(obj)
		}
		d = &decoded{t, obj}
	}
	t, obj := d.t, d.obj
	res.Applied, res.selection = l.all(), l
	st := &applyState{t: t, done: in.Done}
	var owned map[string]bool
	var sidecarFields map[*Policy][]string // with Explain: the containers each policy inserted
	var before validity.CoupledValues      // the coupled fields as given
	var given kueue.Placement              // the placement Kueue decides, as given (kueue.go)
	// A Service's type can change only where a policy writes spec.type: only then is the type
	// as given read (it decodes the spec) and the coupled fields looked at.
	typeWritten := in.Kind == profiles.KindService && anyWrites(res.Applied, profiles.KindService, "type")
	var givenType string              // a Service's type as given
	var kueueMark *validity.Violation // a namespace policy's Kueue mark on an enforced placement
	if typeWritten {
		givenType = validity.ServiceType(t, obj)
	}
	if in.Kind == profiles.KindPod && in.ephemeral == nil {
		before.Read(t, obj)
		given = kueue.Read(t, obj)
		kueueMark = namespaceKueueMark(&given, l)
		// Platform sidecars first, so that a namespace policy cannot claim their names; they
		// are out of the namespace policies' reach, and replace a container of the same name
		// the object brought (reference §3).
		m := newMerger(st, in.Kind, false)
		m.manager = manager
		placed := map[string]bool{}
		if in.Explain {
			sidecarFields = map[*Policy][]string{}
		}
		insert := func(p *Policy, placed map[string]bool) {
			var before any
			if in.Explain {
				before = deepCopy(obj)
			}
			m.insertSidecars(obj, p.Patch(profiles.KindPod), placed)
			if in.Explain { // the containers it adds are its change too
				sidecarFields[p] = diffPaths(before, obj)
			}
		}
		for _, p := range l.platform() {
			if slices.Contains(l.under, p) {
				continue // its containers are not the platform's: another policy's were kept
			}
			insert(p, placed)
			owned = sidecarNames(p.Patch(profiles.KindPod), owned, manager)
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
	pass := func(ps []*Policy, fill bool, namespace bool) {
		m := newMerger(st, in.Kind, fill)
		m.manager = manager
		if namespace {
			m.owned = owned
		}
		for _, p := range ps {
			if st.stopped() {
				return
			}
			var before any
			if in.Explain {
				before = deepCopy(obj)
			}
			patch := p.Patch(in.Kind)
			if in.ephemeral != nil {
				patch = ephemeralPatch(patch, in.ephemeral)
			}
			m.mergeMap(obj, patch)
			if in.Explain {
				res.Changes = append(res.Changes, Change{Policy: p, Fields: slices.Concat(sidecarFields[p], diffPaths(before, obj))})
			}
		}
	}
	// Defaults sit below the object: fill, highest precedence first, so the first to set a field
	// wins; those keepValid kept below the others (layers.under) fill last, as their containers
	// were inserted last.
	namespaceDefault, platformDefault := l.namespaceDefault, l.platformDefault
	if len(l.under) > 0 {
		namespaceDefault, platformDefault = l.atPlace(namespaceDefault), l.atPlace(platformDefault)
	}
	stack := func() {
		pass(reversed(namespaceDefault), true, true)
		pass(reversed(platformDefault), true, false)
		for _, p := range l.under { // each below those kept before it
			pass([]*Policy{p}, true, p.Scope == ScopeNamespace)
		}
		pass(l.platformMerge, false, false)
		pass(l.namespaceMerge, false, true)
		pass(l.enforce, false, false)
	}
	stack()
	// A default's member of a one-of group (a volume's source) that yielded to another the
	// object held, and that a later layer then chose: a second admission would fill the
	// default's members under that choice. So the layers apply once more to what they made,
	// as that admission would (reference §3's fixed point); rare, and bounded.
	for range maxLayerReruns {
		if st.stopped() || !st.switched() {
			break
		}
		st.yields = st.yields[:0]
		stack()
	}

	if st.stopped() {
		return Result{Object: in.Object}, nil, fmt.Errorf("%s not patched: %w", strings.ToLower(string(in.Kind)), st.err)
	}
	if in.Kind == profiles.KindPod && in.ephemeral == nil {
		// Kueue's placement wins on the Pods it manages (reference §8, kueue-placement-conflict).
		flavors, _ := env.Lookups.(kueue.Flavors) // nil: the keys are unknown
		if fs := kueue.Keep(t, obj, &given, res.Applied, flavors); len(fs) > 0 {
			res.Findings = append(res.Findings, fs...)
			if in.Explain {
				res.Changes = dropRestored(res.Changes, in.Object, obj)
			}
		}
	}
	meta, _ := t.GetMap(obj, "metadata")
	labelsV, _ := t.Get(meta, "labels")
	patchedLabels := stringMap(labelsV)
	// What the cluster's Kubernetes version does not keep (policies/versions): the fields it
	// drops are taken out of the object, as the API server would, and a policy that set
	// nothing else is not named in the provenance (reference §8: never claimed).
	kube := versionEffectsOf(res.Applied, in.Kind, env.Lookups)
	onlyDropped := kube.drop(obj, in.Kind, &res)
	refs := make([]string, 0, len(res.Applied))
	for _, p := range res.Applied {
		if !onlyDropped[p] {
			refs = append(refs, p.Ref)
		}
	}
	if !in.enforceOnly {
		setAnnotation(t, obj, AppliedAnnotation, strings.Join(refs, ","))
	}
	switch {
	case in.ephemeral != nil:
	case in.Kind == profiles.KindPod:
		res.Adjusted = validity.Couple(t, obj, &before, func(member string) bool { return anySets(res.Applied, profiles.KindPod, member) }, env.Lookups)
	case in.Kind == profiles.KindService:
		if !typeWritten {
			break
		}
		res.Adjusted = validity.CoupleService(t, obj, givenType, func(member string) bool { return anySets(res.Applied, profiles.KindService, member) })
	}
	res.violations, _ = env.Check(obj)
	res.violations = append(res.violations, kube.refused()...)
	if in.Kind == profiles.KindPod && slices.ContainsFunc(res.violations, func(v validity.Violation) bool { return v.Rule == validity.RuleExtendedResourceLimit }) {
		if adj := validity.EqualizeNonOvercommittable(t, obj); len(adj) > 0 {
			res.Adjusted = append(res.Adjusted, adj...)
			res.violations, _ = env.Check(obj)
		}
	}
	if kueueMark != nil {
		res.violations = append(res.violations, *kueueMark)
	}
	if in.Explain {
		res.Changes = orderChanges(res.Changes, res.Applied)
	}
	var err error
	if res.Patch, err = jsontree.Diff(t, json.RawMessage(in.Object), obj); err != nil {
		return res, nil, fmt.Errorf("diff %s: %w", strings.ToLower(string(in.Kind)), err)
	}
	res.Changed, res.patched, res.labels = true, obj, patchedLabels
	if patchOnly {
		return res, patchedLabels, nil
	}
	if res.Object, err = jsontree.Encode(obj); err != nil {
		return res, nil, fmt.Errorf("encode %s: %w", strings.ToLower(string(in.Kind)), err)
	}
	return res, patchedLabels, nil
}

// namespaceKueueMark is the violation of a selection in which a namespace policy sets a mark of
// Kueue's on a Pod that came without one, that no platform policy marks, and whose placement an
// enforce policy sets (reference §5, issue 38): Kueue's marks make kueue.Keep hand placement to
// Kueue's flavors, so the mark would let a namespace policy take the enforced placement out.
// keepValid then leaves that namespace policy out, as one that broke a rule. Decided on the
// policies and the Pod as given, not on what Keep finds, so that the result's next admission,
// as unmarked, decides the same. nil otherwise.
func namespaceKueueMark(given *kueue.Placement, l layers) *validity.Violation {
	if given.Marked() || !slices.ContainsFunc(l.enforce, func(p *Policy) bool {
		return anyWrites([]*Policy{p}, profiles.KindPod, "nodeSelector") || anyWrites([]*Policy{p}, profiles.KindPod, "tolerations") ||
			anyWrites([]*Policy{p}, profiles.KindPod, "affinity")
	}) {
		return nil
	}
	field := ""
	for _, p := range l.platform() {
		if kueue.MarkWritten(p.Patch(profiles.KindPod)) != "" {
			return nil // the platform hands the Pod to Kueue
		}
	}
	for _, p := range l.namespace() {
		if field = kueue.MarkWritten(p.Patch(profiles.KindPod)); field != "" {
			return &validity.Violation{Rule: validity.RuleKueueMark, Field: field,
				Message: "a mark of Kueue's on a Pod that came without one would hand the placement the platform's enforce policies set to Kueue"}
		}
	}
	return nil
}

// kubeEffects are what the cluster's Kubernetes version does not keep of the applied
// policies' fields (policies/versions), by policy.
type kubeEffects struct {
	version versions.Version
	by      []policyEffects
}

type policyEffects struct {
	policy  *Policy
	effects []versions.Effect
}

// versionEffectsOf finds the fields of the applied policies that the lookups' Kubernetes version
// drops or refuses; none when the version is unknown (and on a version podpatch does not
// support, only what the probe learned). What the API server was
// seen to do (versions.Learner, the probe of internal/references) comes before what the table
// says of its version.
func versionEffectsOf(applied []*Policy, kind profiles.Kind, lookups validity.Lookups) kubeEffects {
	server, ok := lookups.(versions.Server)
	if !ok {
		return kubeEffects{}
	}
	v, known := server.KubeVersion()
	if !known {
		return kubeEffects{}
	}
	k := kubeEffects{version: v} // a version podpatch does not support: what the probe learned only
	for _, p := range applied {
		if es := versions.AffectedOn(string(kind), p.Patch(kind), server, v); len(es) > 0 {
			k.by = append(k.by, policyEffects{p, es})
		}
	}
	return k
}

// drop takes the fields the version drops out of the object, as its API server would, says
// each in res.NoEffect, and returns the policies that set nothing else.
func (k kubeEffects) drop(obj map[string]any, kind profiles.Kind, res *Result) map[*Policy]bool {
	var only map[*Policy]bool
	for _, pe := range k.by {
		var dropped []versions.Field
		for _, e := range pe.effects {
			if e.Outcome != versions.Dropped {
				continue
			}
			res.NoEffect = append(res.NoEffect, NoEffect{Policy: pe.policy, Field: e.At, Gate: e.Field.Gate, Message: e.String(k.version)})
			e.Field.Strip(obj) // the members the merge wrote are decoded; raw ones it never touched keep theirs, as the server drops them too
			dropped = append(dropped, e.Field)
		}
		if len(dropped) > 0 && !setsBeyond(pe.policy, kind, dropped) {
			if only == nil {
				only = map[*Policy]bool{}
			}
			only[pe.policy] = true
		}
	}
	return only
}

// refused are the violations of the fields the version refuses: the policy is left out, or
// the object denied for an enforce one.
func (k kubeEffects) refused() []validity.Violation {
	var out []validity.Violation
	for _, pe := range k.by {
		for _, e := range pe.effects {
			if e.Outcome == versions.Refused {
				out = append(out, validity.Violation{Rule: validity.RuleKubeVersion, Field: e.At, Message: e.String(k.version)})
			}
		}
	}
	return out
}

// setsBeyond reports whether a policy's part for kind sets a field besides the dropped ones.
func setsBeyond(p *Policy, kind profiles.Kind, dropped []versions.Field) bool {
	c, _ := jsontree.Copy(p.Patch(kind), false)
	patch, _ := c.(map[string]any)
	for _, f := range dropped {
		f.Strip(patch)
	}
	pruneEmpty(patch)
	return len(objdiff.Paths(skeleton(patch), patch, objdiff.Options{DescendMissing: true})) > 0
}

// pruneEmpty removes the objects a removal left empty ({spec: {}}), which set nothing.
func pruneEmpty(v any) (empty bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if pruneEmpty(c) {
				delete(x, k)
			}
		}
		return len(x) == 0
	case []any:
		for _, c := range x {
			pruneEmpty(c)
		}
	}
	return false
}

func reversed(ps []*Policy) []*Policy {
	out := make([]*Policy, len(ps))
	for i, p := range ps {
		out[len(ps)-1-i] = p
	}
	return out
}

// orderChanges puts explanations in provenance order (defaults were applied in reverse), one
// per policy (the layers may have applied twice: applyLayers).
func orderChanges(cs []Change, applied []*Policy) []Change {
	by := make(map[*Policy]Change, len(cs))
	for _, c := range cs {
		if prev, ok := by[c.Policy]; ok {
			for _, f := range c.Fields {
				if !slices.Contains(prev.Fields, f) {
					prev.Fields = append(prev.Fields, f)
				}
			}
			c = prev
		}
		by[c.Policy] = c
	}
	out := make([]Change, len(applied))
	for i, p := range applied {
		out[i] = by[p]
	}
	return out
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

// stringMap reads a JSON object of strings (labels, a selector); other values are ignored.
func stringMap(v any) map[string]string {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		if s, ok := x.(string); ok {
			out[k] = s
		}
	}
	return out
}

// hasOps says whether a JSONPatch changes anything.
func hasOps(patch []byte) bool { return len(patch) > 0 && string(patch) != "[]" }
