package policies

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// One admission of a selection and its fallbacks. Enforce has the last word (reference §3, §5,
// §8): whatever leaves the other layers out (the platform's selectors contradicting each
// other, the bound of work, the request budget), the platform's enforce policies apply alone,
// in the budget reserved for them — or the object is denied, never admitted without them. And a
// namespace policy never decides a denial, nor switches the platform's policies off.

// admit is one admission of the strategy st: the fixed point of the labels policies set, the
// platform's enforce policies kept selected, the fallbacks that leave layers out, and the
// result kept valid. first, when set, is the input already decoded, patched in place.
func (e *evaluation) admit(st strategy, first *decoded) (Result, error) {
	out, err := e.fixedPoint(st, first)
	var switchedOff []Skipped // namespace policies left out for the labels they set
	if err == nil {
		out, switchedOff = e.keepEnforceSelected(st, out)
	}
	if err != nil && !errors.Is(err, ErrStopped) && st.layers.hasNamespace() {
		out, err = e.platformAlone(st, err)
	}
	switch {
	case err != nil && len(st.layers.enforce) > 0:
		return e.enforceAlone(st.layers, err)
	case err != nil:
		return out, err
	}
	selected := out.selection
	out, err = e.keepValid(out)
	if err == nil && out.Fallback == FallbackNamespace { // platformAlone's
		out, err = e.settled(platformStrategy(st), out)
	}
	if err == nil && out.Denied && e.in.EnforceDone != nil && enforceOutOfTime(out.Skipped) {
		// The budget of every layer ran out before the enforce policies were checked: they
		// have the reserved one.
		out, err = e.enforceAlone(st.layers, fmt.Errorf("%s not patched: %w", strings.ToLower(string(e.in.Kind)), ErrStopped))
	}
	if err == nil && out.Denied && selected.hasNamespace() && !enforceOutOfTime(out.Skipped) {
		out = e.withoutNamespace(st, selected, out)
	}
	if out.Fallback != FallbackNamespace { // else every namespace policy is left out already
		out.Skipped = append(out.Skipped, switchedOff...)
	}
	return out, err
}

// platformAlone is the answer to namespace policies that make the object unpatchable (err): the
// platform's policies alone, with a warning. The platform's own error is left to the enforce
// fallback.
func (e *evaluation) platformAlone(st strategy, err error) (Result, error) {
	platform := platformStrategy(st)
	if platform.layers.empty() {
		return e.unpatched, err
	}
	pout, perr := e.fixedPoint(platform, nil)
	if perr != nil {
		return pout, perr
	}
	pout.Warnings = append(pout.Warnings, "namespace policies left out: "+err.Error())
	pout.Fallback = FallbackNamespace
	return pout, nil
}

// enforceAlone applies the enforce layer of l alone, in the budget reserved for it, for an
// object the other layers could not patch (cause); denied when even that fails.
func (e *evaluation) enforceAlone(l layers, cause error) (Result, error) {
	hard := e
	if e.in.EnforceDone != nil {
		c := *e
		c.in.Done = e.in.EnforceDone
		hard = &c
	}
	eout, err := hard.enforceOnly(l)
	if err != nil {
		return denied(e.unpatched, l.enforce, err), nil
	}
	fallback, why := FallbackEnforceFirst, cause.Error()
	if errors.Is(cause, ErrSelectionDiverges) {
		fallback, why = FallbackEnforceOnly, fmt.Sprintf("%v for more than %d rounds (their selectors contradict each other; podpatch lint names them)",
			ErrSelectionDiverges, MaxSelectionRounds)
	}
	eout.Warnings = append(eout.Warnings, "only the platform's enforce policies applied, default and merge policies left out: "+why)
	eout.Fallback = fallback
	return hard.keepValid(eout)
}

// enforceOnly applies the enforce layer alone: to its own fixed point when the enforce
// policies' selection converges, else the enforce policies selected on the object as it came
// in, once.
func (e *evaluation) enforceOnly(l layers) (Result, error) {
	enforce := l.enforceKept(e.mode.keep)
	out, err := e.fixedPoint(strategy{enforce, enforceKeep(e.mode.keep)}, nil)
	if errors.Is(err, ErrSelectionDiverges) {
		out, _, err = e.applyLayers(nil, enforce)
	}
	return out, err
}

// keepEnforceSelected makes sure that no namespace policy switches off, by the labels it sets
// or removes, an enforce policy that the object as given selects (reference §5). out is the
// fixed point of the strategy st (the object's as given); when its selection lacks an enforce
// policy of st and namespace policies set labels, the fixed point is sought again without those
// namespace policies, and if it then keeps every enforce policy of st, that is the result and
// they are left out, each with the label and the enforce policy it would have switched off.
// (Keeping the enforce policy selected while the namespace's label stays would not be
// idempotent: the next admission of the result reads that label as given.) When the platform's
// own policies switch the enforce policy off, out stands. It costs another fixed point only
// when an enforce policy was switched off.
func (e *evaluation) keepEnforceSelected(st strategy, out Result) (Result, []Skipped) {
	l := st.layers
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
			if setsLabels(p, e.in.Kind) {
				drop[p] = true
			}
		}
	}
	if len(drop) == 0 {
		return out, nil
	}
	keep := st.keep // captured here, so that the common path keeps st on the stack
	without := func(x *layers) layers {
		y := keep(x)
		f := func(ps []*Policy) []*Policy {
			return slices.DeleteFunc(slices.Clone(ps), func(p *Policy) bool { return drop[p] })
		}
		y.namespaceDefault, y.namespaceMerge = f(y.namespaceDefault), f(y.namespaceMerge)
		return y
	}
	again, err := e.fixedPoint(restricted(l, without), nil)
	if err != nil || len(lost(again.selection)) > 0 {
		return out, nil // not the namespace's doing
	}
	var left []Skipped
	for _, ps := range [][]*Policy{l.namespace(), out.selection.namespace()} {
		for _, p := range ps {
			if drop[p] && !slices.ContainsFunc(left, func(sk Skipped) bool { return sk.Policy == p }) {
				left = append(left, Skipped{Policy: p, Violation: switchesOff(p, e.in.Kind, off)})
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
				return validity.Violation{Rule: validity.ReasonSelection, Field: "metadata.labels[" + r.Key() + "]",
					Message: "sets or removes a label the match of the platform's enforce policy " + e.Ref + " reads, which would switch it off"}
			}
		}
	}
	return validity.Violation{Rule: validity.ReasonSelection, Field: "metadata.labels",
		Message: "sets labels that would switch off the platform's enforce policy " + off[0].Ref}
}

// withoutNamespace is the answer to an object denied with namespace policies selected (out,
// whose selection was selected; reference §5: a namespace policy never decides a denial): the
// platform's policies are applied alone, and when they admit the object, that is the result,
// each namespace policy left out with the violation of the enforce policy it made impossible.
// Whatever route a namespace policy takes to it (the labels it sets selecting an enforce policy
// the object cannot keep, a value keepValid's order cannot tell apart), the object is denied
// only when the platform's policies alone deny it. It costs a platform-only apply, and only on
// a denial.
func (e *evaluation) withoutNamespace(st strategy, selected layers, out Result) Result {
	platform := platformStrategy(st)
	pout, err := e.fixedPoint(platform, nil)
	if err != nil {
		return out
	}
	if pout, err = e.keepValid(pout); err == nil {
		pout, err = e.settled(platform, pout)
	}
	if err != nil || pout.Denied {
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

// allLayers keeps every layer of a selection, for fixedPoint.
func allLayers(l *layers) layers { return *l }

// platformStrategy is st without the namespace's policies, in its every selection.
func platformStrategy(st strategy) strategy {
	return strategy{st.layers.platformOnly(), platformOnly(st.keep)}
}

// platformOnly is keep, without namespace policies, for fixedPoint's every selection.
func platformOnly(keep func(*layers) layers) func(*layers) layers {
	return func(l *layers) layers { y := keep(l); return y.platformOnly() }
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
		return sk.Policy.Mode == ModeEnforce && sk.Violation.Rule == validity.ReasonBudget
	})
}

// denied is the Result of an object whose enforce policies cannot be applied for err: nothing
// applied, each enforce policy skipped for the reason err names (reference §5).
func denied(res Result, enforce []*Policy, err error) Result {
	rule := validity.ReasonWork
	switch {
	case errors.Is(err, ErrStopped):
		rule = validity.ReasonBudget
	case errors.Is(err, ErrSelectionDiverges):
		rule = validity.ReasonSelection
	}
	v := validity.Violation{Rule: rule, Message: err.Error()}
	for _, p := range enforce {
		res.Skipped = append(res.Skipped, Skipped{Policy: p, Violation: v})
	}
	res.Denied = true
	return res
}
