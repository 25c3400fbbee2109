package policies

import (
	"cmp"
	"slices"
)

// The selection settled (reference §3's fixed point): policies left out for their result's
// validity may have taken part in the selection, which is then sought again without them.

// settleSelection is for an admission of the strategy st whose result's labels select other
// policies than those it came from (unsettled): the first strategy's, or the platform's alone
// where the namespace's policies were left out (settled). A policy left out for the validity of the
// result (keepValid) whose labels took part in the selection: without them the result's labels
// may select other policies than those the admission applied, and a second admission, which
// reads those labels as the object's own, would apply them (reference §3's fixed point). The
// selection is then sought again without the policies so left out, which stay left out, until
// the result's labels select what it applied. It returns the result, whether its labels still
// select otherwise, whether policies were so left out, and the error.
func (e *evaluation) settleSelection(st strategy, out Result) (Result, bool, bool, error) {
	excluded := map[*Policy]bool{}
	var carried []Skipped // the excluded policies, and why each was left out
	keep := st.keep
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
		if out, err = e.admit(restricted(st.layers, keep), nil); err != nil {
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
		all := st.layers.all() // in application order
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

// settled is out, a result of the strategy st that left the namespace's policies out (admit:
// platformAlone, withoutNamespace), with its selection settled as the first strategy's is
// (settleSelection): policies left out for the validity of the platform's result may have taken
// part in its selection, and a second admission, reading the result's labels as the object's
// own, would select otherwise, an enforce policy among them. It keeps out's warnings and
// fallback; a denial stands as settleSelection makes it.
func (e *evaluation) settled(st strategy, out Result) (Result, error) {
	probe := out
	probe.Fallback = FallbackNone // unsettled passes over fallbacks; this one is st's own
	if unsettled, _ := e.unsettled(st.keep, probe); !unsettled {
		return out, nil
	}
	res, _, _, err := e.settleSelection(st, probe)
	if err != nil || res.Denied {
		return res, err
	}
	res.Warnings = append(slices.Clone(out.Warnings), res.Warnings...)
	res.Fallback = out.Fallback
	return res, nil
}
