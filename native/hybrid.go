package native

import (
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The hybrid stage. With the MAPs and the webhook both installed, the API server runs the MAPs
// first and the webhook admits what they made, finding the compiled policies applied (its
// fixed point, reference §3). The object is then the webhook's alone only where no policy left
// to the webhook contends with a compiled one for what both write: otherwise a compiled append
// lands before the one of an earlier policy left to the webhook, and a compiled default fills a
// key first that an earlier default left to the webhook fills when alone. So a compiled policy
// that contends with a policy left to the webhook, on Pods both may select, is left to the
// webhook too, and so on until none is.

// slot is a field whose writers' order matters: a key of labels, annotations or nodeSelector
// ("metadata.labels/team"; "metadata.labels/*" is the whole map), the tolerations, the
// required node affinity, the containers' env variables.
type slot string

const (
	slotTolerations = slot("spec.tolerations")
	slotRequired    = slot("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
	slotEnv         = slot("spec.containers[*].env")
)

// stringMaps are the string maps whose keys are slots of their own, by where they stand.
var stringMaps = []struct{ parent, name string }{
	{"metadata", "labels"}, {"metadata", "annotations"}, {"spec", "nodeSelector"},
}

// writes are the slots a policy's pod part writes: each string map key it sets or removes, the
// whole map where it nulls the map or its parent, and the lists it touches in any way.
func writes(patch map[string]any) []slot {
	var out []slot
	for _, m := range stringMaps {
		parent, present := patch[m.parent]
		if !present {
			continue
		}
		whole := slot(m.parent + "." + m.name + "/*")
		pm, ok := parent.(map[string]any)
		if !ok {
			out = append(out, whole)
			continue
		}
		v, present := pm[m.name]
		if !present {
			continue
		}
		keys, ok := v.(map[string]any)
		if !ok {
			out = append(out, whole)
			continue
		}
		for k := range keys {
			out = append(out, slot(m.parent+"."+m.name+"/"+k))
		}
	}
	spec, present := patch["spec"]
	if !present {
		return out
	}
	sm, ok := spec.(map[string]any)
	if !ok {
		return append(out, slotTolerations, slotRequired, slotEnv)
	}
	if _, ok := sm["tolerations"]; ok {
		out = append(out, slotTolerations)
	}
	if writesRequired(sm) {
		out = append(out, slotRequired)
	}
	if writesEnv(sm["containers"]) {
		out = append(out, slotEnv)
	}
	return out
}

// writesRequired says whether a pod part's spec writes the required node affinity, or nulls
// what holds it.
func writesRequired(spec map[string]any) bool {
	aff, present := spec["affinity"]
	if !present {
		return false
	}
	am, ok := aff.(map[string]any)
	if !ok {
		return true
	}
	na, present := am["nodeAffinity"]
	if !present {
		return false
	}
	nm, ok := na.(map[string]any)
	if !ok {
		return true
	}
	_, present = nm["requiredDuringSchedulingIgnoredDuringExecution"]
	return present
}

// writesEnv says whether a pod part's containers write env variables: an entry with env, a
// whole container (a sidecar's own variables), or the list nulled.
func writesEnv(containers any) bool {
	if containers == nil {
		return false
	}
	list, ok := containers.([]any)
	if !ok {
		return true
	}
	for _, c := range list {
		cm, ok := c.(map[string]any)
		if !ok {
			return true
		}
		if _, ok := cm["env"]; ok {
			return true
		}
	}
	return false
}

// key says whether the slot is a string map's key (or whole map). Of those, only two defaults
// contend: the last merge or enforce writer's value stands wherever the webhook finds the
// compiled value, as it does alone, and the object's own (or the compiled) value stops every
// default, so a compiled default filling a key first differs only from a default left to the
// webhook that would have filled it before.
func (s slot) key() bool { return strings.Contains(string(s), "/") }

// whole is the slot of a string map key's whole map, or the slot itself.
func (s slot) whole() slot {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return s[:i] + "/*"
		}
	}
	return s
}

// field is how lint names the slot's field.
func (s slot) field() string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			if s[i+1:] == "*" {
				return string(s[:i])
			}
			return string(s[:i]) + "." + string(s[i+1:])
		}
	}
	return string(s)
}

// groupSlot is a slot in one manager's role: policies of other groups select other Pods.
type groupSlot struct {
	manager profiles.Manager
	role    profiles.Role
	slot    slot
}

// leaveConflicts leaves to the webhook every compiled policy (in parts) that writes a slot a
// policy left to the webhook writes, in a group both are in, unless no Pod can be selected by
// both (exclusive); then every compiled policy that writes a slot of one so left, and so on.
// leave records each. Each policy left to the webhook visits the writers of its slots once.
func leaveConflicts(all []*policies.Policy, parts map[*policies.Policy]podPart, leave func(p *policies.Policy, field, reason string)) {
	writers := map[groupSlot][]*policies.Policy{}
	var queue []*policies.Policy
	for _, p := range all {
		patch := p.Patch(profiles.KindPod)
		if patch == nil {
			continue
		}
		if _, ok := parts[p]; !ok {
			queue = append(queue, p)
			continue
		}
		ws := writes(patch)
		inGroups(p, func(m profiles.Manager, r profiles.Role) {
			for _, s := range ws {
				writers[groupSlot{m, r, s}] = append(writers[groupSlot{m, r, s}], p)
				if w := s.whole(); w != s {
					writers[groupSlot{m, r, w}] = append(writers[groupSlot{m, r, w}], p)
				}
			}
		})
	}
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		ws := writes(w.Patch(profiles.KindPod))
		slices.Sort(ws)
		inGroups(w, func(m profiles.Manager, r profiles.Role) {
			for _, s := range ws {
				for _, p := range writers[groupSlot{m, r, s}] {
					if _, ok := parts[p]; !ok || exclusive(w, p) || (s.key() && !(w.Mode == policies.ModeDefault && p.Mode == policies.ModeDefault)) {
						continue
					}
					leave(p, s.field(), fmt.Sprintf("%s, left to the webhook, writes it too on Pods this policy may select: "+
						"the MAPs run before the webhook, which would then order or fill it otherwise than alone", ref(w)))
					queue = append(queue, p)
				}
			}
		})
	}
}

// exclusive says whether no Pod can be selected by both p and q: their namespaces (a
// namespace policy's own, else its match.namespaces), clusters or groups are lists of names
// without a wildcard on both sides, and share none.
func exclusive(p, q *policies.Policy) bool {
	namespaces := func(x *policies.Policy) []string {
		if x.Scope == policies.ScopeNamespace {
			return []string{x.Namespace}
		}
		return x.Namespaces()
	}
	for _, names := range []func(*policies.Policy) []string{namespaces, (*policies.Policy).Clusters, (*policies.Policy).Groups} {
		a, b := names(p), names(q)
		if literal(a) && literal(b) && !slices.ContainsFunc(a, func(n string) bool { return slices.Contains(b, n) }) {
			return true
		}
	}
	return false
}

// inGroups calls f with each manager's role that p may select in, as compileGroups groups.
func inGroups(p *policies.Policy, f func(profiles.Manager, profiles.Role)) {
	for _, pr := range profiles.All() {
		for _, r := range profiles.Roles {
			if len(pr.RoleNames(r)) > 0 && selectsIn(p, pr.Manager, r) {
				f(pr.Manager, r)
			}
		}
	}
}
