package policies

import (
	"encoding/json"
	"slices"

	"k8s.io/apimachinery/pkg/selection"

	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// EnforceConflict is a namespace policy that admission would leave out because of a platform
// enforce policy (reference §5, "Enforce: applied or denied"): applied together to a
// synthetic object that both select, the enforce policy holds and the namespace policy is left
// out, though it is kept alone.
type EnforceConflict struct {
	// Policy is the namespace policy, Enforce the platform's enforce policy it conflicts with.
	Policy, Enforce *Policy
	// Kind, Manager and Role say the synthetic object it was found on.
	Kind    profiles.Kind
	Manager profiles.Manager
	Role    string
	// Violation is why admission leaves the namespace policy out.
	Violation validity.Violation
}

// EnforceConflicts finds, for `lint`, the namespace policies of a namespace that conflict with
// the set's platform enforce policies, by the engine admission runs (Set.Apply): each namespace
// policy and each enforce policy that can select the same objects are applied together to a
// synthetic object of every manager and role both can select (the one lintValidity uses, in
// the namespace, with the labels the enforce policy's selector asks for). What lint cannot see —
// the objects' own fields, the cluster's objects (a RuntimeClass's scheduling, a
// PriorityClass), the namespace's labels an enforce policy's namespaceSelector reads — is
// decided at admission, where such a namespace policy is left out all the same. At most one
// conflict per pair of policies; the work is three applies of a small object per pair and
// target.
func (s *Set) EnforceConflicts(namespace string) []EnforceConflict {
	var enforce []*Policy
	for _, p := range s.platform.policies() {
		if p.Mode == ModeEnforce {
			enforce = append(enforce, p)
		}
	}
	var out []EnforceConflict
	for _, n := range s.Policies(ScopeNamespace, namespace) {
		for _, e := range enforce {
			if c, ok := enforceConflict(n, e, namespace); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// enforceConflict is EnforceConflicts for one pair.
func enforceConflict(n, e *Policy, namespace string) (EnforceConflict, bool) {
	targets := lintTargets(e)
	for _, kind := range []profiles.Kind{profiles.KindPod, profiles.KindService} {
		np, ep := n.Patch(kind), e.Patch(kind)
		if np == nil || ep == nil {
			continue
		}
		both, alone, nalone := NewSet([]*Policy{e, n}), NewSet([]*Policy{e}), NewSet([]*Policy{n})
		for _, tg := range lintTargets(n) {
			if !slices.ContainsFunc(targets, func(x lintTarget) bool { return x.profile == tg.profile && x.role == tg.role }) {
				continue
			}
			obj := conflictObject(kind, tg, n, e, namespace)
			in := Input{Kind: kind, Object: obj, Namespace: namespace}
			res, err := both.Apply(in)
			if err != nil {
				continue
			}
			i := slices.IndexFunc(res.Skipped, func(sk Skipped) bool { return sk.Policy == n })
			if i < 0 {
				continue
			}
			if a, err := alone.Apply(in); err != nil || a.Denied || len(a.Applied) == 0 {
				continue // the enforce policy's own problem, or it does not select the object
			}
			if a, err := nalone.Apply(in); err != nil || len(a.Skipped) > 0 {
				continue // the namespace policy's own problem
			}
			return EnforceConflict{Policy: n, Enforce: e, Kind: kind, Manager: tg.profile.Manager, Role: tg.role, Violation: res.Skipped[i].Violation}, true
		}
	}
	return EnforceConflict{}, false
}

// conflictObject is the synthetic object of a target for the parts of a kind of a namespace
// policy n and an enforce policy e: its containers are those both parts' partial entries name,
// its namespace the namespace policy's, and its labels hold those the enforce policy's selector
// asks for (a value it names, for = and in).
func conflictObject(kind profiles.Kind, tg lintTarget, n, e *Policy, namespace string) []byte {
	var patch map[string]any
	if kind == profiles.KindPod {
		var lists = map[string][]any{}
		for _, p := range []map[string]any{n.Patch(kind), e.Patch(kind)} {
			spec, _ := p["spec"].(map[string]any)
			for _, list := range []string{"containers", "initContainers"} {
				entries, _ := spec[list].([]any)
				lists[list] = append(lists[list], entries...)
			}
		}
		spec := map[string]any{}
		for list, entries := range lists {
			spec[list] = entries
		}
		patch = map[string]any{"spec": spec}
	}
	var obj map[string]any
	if json.Unmarshal(syntheticObject(kind, tg, patch), &obj) != nil {
		return nil
	}
	meta := obj["metadata"].(map[string]any)
	meta["namespace"] = namespace
	labels := meta["labels"].(map[string]any)
	if e.match.selector != nil {
		reqs, _ := e.match.selector.Requirements()
		for _, r := range reqs {
			if _, reserved := labels[r.Key()]; reserved {
				continue
			}
			switch r.Operator() {
			case selection.Equals, selection.DoubleEquals, selection.In:
				if vs := r.Values().List(); len(vs) > 0 {
					labels[r.Key()] = vs[0]
				}
			case selection.Exists:
				labels[r.Key()] = "podpatch-lint"
			}
		}
	}
	raw, _ := json.Marshal(obj) // decoded JSON: it cannot fail
	return raw
}
