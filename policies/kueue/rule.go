package kueue

import (
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

// rule says which placement Keep leaves as the Pod came: with the flavors known, the keys they
// decide (Keep has checked that Kueue shows its hand in the Pod); unknown, everything; in both,
// with keepEnforced, minus what an enforce policy sets.
type rule struct {
	known        bool
	keys         Keys
	keepEnforced bool
	enforced     enforcedKeys
}

// node reports whether the nodeSelector key k is left as the Pod came.
func (r *rule) node(k string) bool {
	if r.known && !r.keys.NodeLabels[k] {
		return false
	}
	return !r.keepEnforced || !r.enforced.whole[0] && !r.enforced.selector[k]
}

// tol reports whether the tolerations of key k are left as the Pod came (an empty key tolerates
// every taint, Kueue's included).
func (r *rule) tol(k string) bool {
	if r.known && k != "" && !r.keys.Tolerations[k] {
		return false
	}
	return !r.keepEnforced || !r.enforced.whole[1] && !r.enforced.tols[k]
}

// affinity reports whether the required node affinity is left as the Pod came, given its value
// after the policies (req) and as given.
func (r *rule) affinity(req, given any) bool {
	if r.known && !namesKey(req, r.keys.NodeLabels) && !namesKey(given, r.keys.NodeLabels) {
		return false
	}
	return !r.keepEnforced || !r.enforced.whole[2]
}

// enforcedKeys is the placement the enforce policies set: whole, per member (nodeSelector,
// tolerations, the required node affinity), when one sets it other than key by key (null, or
// the required affinity at all); else the nodeSelector keys and toleration keys they name.
type enforcedKeys struct {
	whole    [3]bool
	selector map[string]bool
	tols     map[string]bool
}

// enforcedPlacement reads the placement of the enforce policies among applied (a policy that
// cannot say whether it enforces counts as one).
func enforcedPlacement[P checks.Policy](applied []P) enforcedKeys {
	e := enforcedKeys{selector: map[string]bool{}, tols: map[string]bool{}}
	for _, p := range applied {
		if en, ok := any(p).(Enforcer); ok && !en.Enforced() {
			continue
		}
		spec, _ := p.Patch(profiles.KindPod)["spec"].(map[string]any)
		if v, ok := spec["nodeSelector"]; ok {
			if m, isMap := v.(map[string]any); isMap {
				for k := range m {
					e.selector[k] = true
				}
			} else {
				e.whole[0] = true
			}
		}
		if v, ok := spec["tolerations"]; ok {
			if l, isList := v.([]any); isList {
				for _, item := range l {
					m, _ := item.(map[string]any)
					k, _ := m["key"].(string)
					e.tols[k] = true
				}
			} else {
				e.whole[1] = true
			}
		}
		if v, ok := spec["affinity"]; ok {
			aff, isMap := v.(map[string]any)
			na, set := aff["nodeAffinity"]
			nam, naMap := na.(map[string]any)
			_, req := nam["requiredDuringSchedulingIgnoredDuringExecution"]
			if !isMap || set && (!naMap || req) {
				e.whole[2] = true
			}
		}
	}
	return e
}

// admitted reports whether the Pod as given carries the whole placement of one of flavors (all
// its node labels in spec.nodeSelector with its values, all its tolerations): what Kueue's
// admission writes into a workload's pod templates. A flavor that writes nothing proves
// nothing. The work is linear in the flavors' entries and the Pod's tolerations.
func (p *Placement) admitted(flavors []Flavor) bool {
	var tols map[Toleration]bool
	for _, f := range flavors {
		if len(f.NodeLabels) == 0 && len(f.Tolerations) == 0 {
			continue
		}
		match := true
		for k, v := range f.NodeLabels {
			if got, ok := p.selector[k].(string); !ok || got != v {
				match = false
				break
			}
		}
		if match && len(f.Tolerations) > 0 && tols == nil {
			tols = make(map[Toleration]bool, len(p.tols))
			for _, item := range p.tols {
				m, _ := item.(map[string]any)
				tols[tolerationOf(m)] = true
			}
		}
		for _, t := range f.Tolerations {
			if !match {
				break
			}
			match = tols[normal(t)]
		}
		if match {
			return true
		}
	}
	return false
}

// tolerationOf reads a Pod's toleration (decoded JSON) as a flavor's.
func tolerationOf(m map[string]any) Toleration {
	var t Toleration
	t.Key, _ = m["key"].(string)
	t.Operator, _ = m["operator"].(string)
	t.Value, _ = m["value"].(string)
	t.Effect, _ = m["effect"].(string)
	return normal(t)
}

// normal reads an empty operator as Equal, as the API server does.
func normal(t Toleration) Toleration {
	if t.Operator == "" {
		t.Operator = "Equal"
	}
	return t
}
