package policies

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// The check stage (doc.go). Valid in, valid out (reference §8): after the layers are applied,
// the patched object is checked as the API server will check it — its validation for the
// fields a policy can touch and their cross-field rules, the built-in admission plugins that
// run again after a webhook changed it (Priority, RuntimeClass, ServiceAccount, LimitRanger,
// PodSecurity), and the existence of the cluster objects it references: the rules are package
// validity's. Only problems the object did not arrive with count ("no worse than given"). When
// there are any, the policies are added back one by one, highest precedence first, each kept
// only when the result gains no new problem; the others are left out for this object
// (Result.Skipped), named in an admission warning and counted by rule.

// Check returns the reasons the API server would refuse an object as it is, by the rules of
// reference §8's check (Input.Kind, Object, Namespace, NamespaceLabels and Lookups are read): for
// `diff` ("would it become invalid") and the oracle tests that pin the rules. It returns at most
// MaxViolations.
func Check(in Input) ([]validity.Violation, error) {
	if !json.Valid(in.Object) { // Expand trusts its input to be valid
		return nil, fmt.Errorf("decode %s: not valid JSON", strings.ToLower(string(in.Kind)))
	}
	obj, ok := jsontree.Expand(json.RawMessage(in.Object)).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode %s: expected a JSON object", strings.ToLower(string(in.Kind)))
	}
	meta, _ := jsontree.Expand(obj["metadata"]).(map[string]any)
	ns, _ := jsontree.Expand(meta["namespace"]).(string)
	if ns == "" {
		ns = in.Namespace
	}
	env := envOf(in, ns)
	vs, _ := env.CheckAll(obj)
	return vs, nil
}

// envOf is the check's environment of an input whose namespace is namespace.
func envOf(in Input, namespace string) *validity.Env {
	return &validity.Env{Service: in.Kind == profiles.KindService, Namespace: namespace, NamespaceLabels: in.NamespaceLabels, Lookups: in.Lookups}
}

// MaxValidityPasses bounds how often keepValid goes over the policies it left out: a policy
// may need another to be valid (a volumeMount and the volume it mounts), so those left out are
// tried again with what was kept, until a pass keeps none or this many passes ran. With
// namespace policies the platform's are searched first and the namespace's after (keepValid),
// a platform policy left out in the first search being tried again in the second. An object
// thus costs at most MaxValidityPasses applies per matching policy (twice that for a platform
// policy left out, and for a default also tried below the other defaults), and only when the
// policies would make it invalid.
const MaxValidityPasses = 3

// keepValid leaves out the policies whose contribution makes the object invalid (reference §8:
// valid in, valid out); an enforce policy that cannot be kept denies it. out is the result of
// applying every policy of its selection. In the common case (no new violation) it costs nothing
// more than the check already done.
//
// Highest precedence first (enforce, then merges, then defaults): where two policies conflict,
// precedence decides which stays, as it decides which value wins, and a default whose value a
// higher policy replaces stays, harmless. (Lowest first would leave out a default that breaks
// the object only without the policy that overrides it; the next admission of the result
// would keep it: not idempotent.)
//
// The platform's policies first, the namespace's after (reference §5): an enforce policy may
// be kept only on a later pass, once a platform policy it needs (the volume it mounts) was
// kept; a namespace policy kept before that could conflict with it and make it be left out, and
// the object denied for the namespace's policy. So the platform's own are searched first,
// among themselves, and the namespace's are then tried on top, with the platform's left out
// tried again after them in precedence order (a namespace policy may supply what one lacked).
// A namespace policy thus never makes a platform policy be left out, and never makes an object
// denied that the platform's alone admit.
//
// A default whose contribution at its place makes the object invalid is tried once more below
// every other policy kept (layers.under: it fills only what they leave unset, and its
// containers are inserted after theirs, replacing none), and kept there when that is valid.
// That is where every later admission puts it: it reads what the kept policies set as the
// object's own, which a default does not override. (Of two namespace defaults on one field,
// the later's invalid value left out and the earlier's kept, a re-admission finds the field
// set and the later default harmless, and claims it.)
func (e *evaluation) keepValid(out Result) (Result, error) {
	if len(out.violations) == 0 {
		return out, nil
	}
	given, complete := e.env.CheckGiven(e.in.Object)
	if !complete || len(validity.Fresh(out.violations, given)) == 0 {
		// No worse than given; or given so broken that new problems cannot be told apart (and
		// the API server refuses it anyway). Every violation of a truncated result that the
		// complete given lacks is new, so a truncated result needs no special case.
		return out, nil
	}
	l := out.selection
	v := &validSearch{l: l, given: given, done: e.in.Done,
		keep: make(map[*Policy]bool, len(l.all())), placed: map[*Policy]validity.Violation{},
		why: map[*Policy]validity.Violation{}, best: Result{Object: e.in.Object}}
	order := slices.Clone(l.all())
	slices.Reverse(order)
	if !l.hasNamespace() {
		v.search(e, order)
	} else if v.search(e, slices.DeleteFunc(slices.Clone(order), func(p *Policy) bool { return p.Scope == ScopeNamespace })) && v.err == nil {
		v.search(e, slices.DeleteFunc(order, func(p *Policy) bool { return v.keep[p] }))
	}
	if v.err != nil {
		return Result{Object: e.in.Object}, v.err
	}
	return v.result(out.Warnings), nil
}

// validSearch is keepValid's search for the policies an object keeps, by the evaluation each
// of its steps is given.
type validSearch struct {
	l     layers
	given []validity.Violation // the object's own problems
	done  <-chan struct{}
	keep  map[*Policy]bool
	under []*Policy
	// placed is why a default kept under the others is not at its place.
	placed map[*Policy]validity.Violation
	// why is why each policy left out is.
	why  map[*Policy]validity.Violation
	best Result
	err  error
}

// try applies what is kept, p the policy last added; false when the search must stop (err, or
// the budget).
func (v *validSearch) try(e *evaluation, p *Policy) (Result, bool) {
	res, _, err := e.applyLayers(nil, v.l.only(v.keep, v.under))
	if errors.Is(err, ErrStopped) {
		// The budget ran out mid-search: what was kept is known valid and holds the highest
		// precedence (enforce first), so it applies; the rest is left out, said so. Anything
		// else would let whoever makes the search long (a tenant's policies on their own Pods)
		// switch the platform's enforce policies off.
		delete(v.keep, p)
		v.under = slices.DeleteFunc(v.under, func(q *Policy) bool { return q == p })
		for _, q := range v.l.all() {
			if _, left := v.why[q]; !left && !v.keep[q] {
				v.why[q] = validity.Violation{Rule: validity.ReasonBudget, Message: "the request budget ran out before podpatch could check this policy"}
			}
		}
		return res, false
	}
	if err != nil {
		v.err = err
		return res, false
	}
	return res, true
}

// search adds pending back, pass by pass; false when the search stopped.
func (v *validSearch) search(e *evaluation, pending []*Policy) bool {
	for pass := 0; pass < MaxValidityPasses && len(pending) > 0; pass++ {
		var next []*Policy
		for _, p := range pending {
			fresh, ok := v.add(e, p)
			if !ok {
				return false
			}
			if len(fresh) > 0 {
				delete(v.keep, p)
				v.why[p] = slices.MinFunc(fresh, validity.Compare) // the same one every time
				next = append(next, p)
			}
		}
		if len(next) == len(pending) || stopped(v.done) {
			break // nothing more can be kept
		}
		pending = next
	}
	return true
}

// add keeps p with what is kept, at its place or, for a default, below the others; it returns
// the new problems p brings there, and false when the search stopped.
func (v *validSearch) add(e *evaluation, p *Policy) ([]validity.Violation, bool) {
	v.keep[p] = true
	res, ok := v.try(e, p)
	if !ok {
		return nil, false
	}
	fresh := validity.Fresh(res.violations, v.given)
	if len(fresh) > 0 && p.Mode == ModeDefault && len(v.keep) > 1 {
		v.under = append(v.under, p)
		if res, ok = v.try(e, p); !ok {
			return nil, false
		}
		if len(validity.Fresh(res.violations, v.given)) > 0 {
			v.under = v.under[:len(v.under)-1]
		} else {
			v.placed[p], fresh = slices.MinFunc(fresh, validity.Compare), nil
		}
	}
	if len(fresh) == 0 {
		delete(v.why, p)
		v.best = res
	}
	return fresh, true
}

// result is the best result found, with the policies left out in application order and the
// warnings of the defaults kept below the others, then the warnings of the first result.
func (v *validSearch) result(warnings []string) Result {
	best := v.best
	for _, p := range v.l.all() { // in application order
		if why, left := v.why[p]; left {
			best.Skipped = append(best.Skipped, Skipped{Policy: p, Violation: why})
			best.Denied = best.Denied || p.Mode == ModeEnforce // reference §5: applied or denied
		}
	}
	for _, p := range v.l.all() {
		if slices.Contains(best.selection.under, p) {
			best.Warnings = append(best.Warnings, "policy "+p.Ref+" applied below the other default policies, whose values it does not fill over: at its place "+v.placed[p].String())
		}
	}
	best.Warnings = append(best.Warnings, warnings...)
	return best
}

// only is the selection restricted to the policies in keep, those of under filling below the
// other defaults.
func (l *layers) only(keep map[*Policy]bool, under []*Policy) layers {
	f := func(ps []*Policy) []*Policy {
		return slices.DeleteFunc(slices.Clone(ps), func(p *Policy) bool { return !keep[p] })
	}
	return layers{platformDefault: f(l.platformDefault), namespaceDefault: f(l.namespaceDefault),
		platformMerge: f(l.platformMerge), namespaceMerge: f(l.namespaceMerge), enforce: f(l.enforce),
		under: slices.Clone(under)}
}

// stopped reports whether the request budget has run out.
func stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
