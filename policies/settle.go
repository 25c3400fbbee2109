package policies

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/policies/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The fixed point (reference §3): a second admission of what an admission made changes
// nothing. The labels policies set may select other policies (fixedPoint); policies left out
// may have taken part in the selection (settleSelection); and a result with policies left out
// is admitted again until that changes nothing (readmit).

// MaxSelectionRounds bounds how often one admission re-selects policies because labels that
// policies set make other policies' selectors match (or stop matching).
const MaxSelectionRounds = 4

// fixedPoint applies the layers and, while the labels they set change which policies match,
// selects again and applies the new selection to the object as it came in, so that a second
// admission of the result selects the same policies and changes nothing. Beyond
// MaxSelectionRounds the selection oscillates: the object is not patched (admit then tries
// without namespace policies, then the enforce layer alone). st.keep restricts every selection
// to the layers of such a fallback.
func (e *evaluation) fixedPoint(st strategy, first *decoded) (Result, error) {
	l, selected := st.layers, e.sub.labels // the labels l was selected with
	for round := 1; ; round++ {
		res, labels, err := e.applyLayers(first, l)
		first = nil
		if err != nil || (round == 1 && !l.any(func(p *Policy) bool { return setsLabels(p, e.in.Kind) })) {
			// Without labels set by policies, the first selection cannot change. A later one
			// that sets none leaves the object's own labels, which select the first selection
			// again: selectionReads compares the labels this one was selected with.
			return res, err
		}
		if !e.s.selectionReads(&e.sub, selected, labels) {
			return res, nil // nor when no selector reads the labels they changed
		}
		next := e.s.selectLayers(e.sub.relabelled(labels))
		next = st.keep(&next)
		if next.equal(l) {
			return res, nil
		}
		if round == MaxSelectionRounds {
			return Result{Object: e.in.Object}, fmt.Errorf("%s not patched: %w for more than %d rounds (their selectors contradict each other)",
				strings.ToLower(string(e.in.Kind)), ErrSelectionDiverges, MaxSelectionRounds)
		}
		l, selected = next, labels
	}
}

// setsLabels reports whether a policy sets or removes a label of a kind of object.
func setsLabels(p *Policy, kind profiles.Kind) bool {
	meta, ok := p.Patch(kind)["metadata"].(map[string]any)
	return ok && meta["labels"] != nil
}

// settleSelection is for an admission of the first strategy whose result's labels select other
// policies than those it came from (unsettled). A policy left out for the validity of the
// result (keepValid) whose labels took part in the selection: without them the result's labels
// may select other policies than those the admission applied, and a second admission, which
// reads those labels as the object's own, would apply them (reference §3's fixed point). The
// selection is then sought again without the policies so left out, which stay left out, until
// the result's labels select what it applied. It returns the result, whether its labels still
// select otherwise, whether policies were so left out, and the error.
func (e *evaluation) settleSelection(out Result) (Result, bool, bool, error) {
	excluded := map[*Policy]bool{}
	var carried []Skipped // the excluded policies, and why each was left out
	keep := e.all.keep
	unsettled := true
	for range MaxSelectionRounds {
		var writers []*Policy
		if unsettled, writers = e.unsettled(keep, out); len(writers) == 0 {
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
		var err error
		if out, err = e.admit(restricted(e.all.layers, keep), nil); err != nil {
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
		all := e.all.layers.all() // in application order
		slices.SortStableFunc(out.Skipped, func(a, b Skipped) int {
			return cmp.Compare(slices.Index(all, a.Policy), slices.Index(all, b.Policy))
		})
	}
	return out, unsettled, len(carried) > 0, nil
}

// unsettled reports whether the labels of out's object select other policies than the
// selection out came from (those it applied and those it left out), when out left policies out
// or kept defaults below the others (keepValid, keepEnforceSelected): then the admission is not
// yet a fixed point (reference §3). writers are the policies it left out that set labels.
// Nothing when out fell back on fewer layers or was denied.
func (e *evaluation) unsettled(keep func(*layers) layers, out Result) (bool, []*Policy) {
	if out.Denied || out.Fallback != FallbackNone || len(out.Skipped)+len(out.selection.under) == 0 {
		return false, nil
	}
	kind := e.in.Kind
	var writers []*Policy
	for _, sk := range out.Skipped {
		if setsLabels(sk.Policy, kind) {
			writers = append(writers, sk.Policy)
		}
	}
	if len(writers) == 0 && !slices.ContainsFunc(out.selection.under, func(p *Policy) bool { return setsLabels(p, kind) }) {
		return false, nil // the labels are those the selection was made with
	}
	next := e.s.selectLayers(e.sub.relabelled(out.labels))
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
// it, said against the object as it came: its Patch, the policies it applied, its warnings and
// fallback, what the admissions left out that it neither applied nor left out, and what they
// changed. When an admission fails or is denied, out stands.
func (e *evaluation) readmit(out Result) Result {
	m := e.mode
	m.readmitted = true
	for range maxReadmissions {
		cur, err := jsontree.Encode(out.patched)
		if err != nil {
			return out
		}
		again := e.in
		again.Object = cur
		r, err := e.s.apply(again, m)
		if err != nil || r.Denied || r.patched == nil || !hasOps(r.Patch) {
			return out
		}
		if out, err = e.readmitted(out, r); err != nil {
			return out
		}
	}
	return out
}

// readmitted is what a readmission r of out's object makes of it, said against the object as
// it came (readmit).
func (e *evaluation) readmitted(out, r Result) (Result, error) {
	cur, err := jsontree.Encode(r.patched)
	if err != nil {
		return out, err
	}
	t := jsontree.New()
	tree := t.Decode(json.RawMessage(cur))
	jsontree.ExpandAll(tree)
	patch, err := jsontree.Diff(t, json.RawMessage(e.in.Object), tree)
	if err != nil {
		return out, err
	}
	next := r
	next.Object, next.Patch = e.in.Object, patch
	if !e.mode.patchOnly {
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
	if e.in.Explain {
		next.Changes = orderChanges(append(slices.Clone(out.Changes), r.Changes...), r.Applied)
	}
	return next, nil
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
