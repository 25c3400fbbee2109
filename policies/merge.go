package policies

import (
	"encoding/json"
	"strings"
)

// listKey returns the identity of a list item, for lists merged item by item.
type listKey func(item map[string]any) string

// keyOf builds a listKey from fields; defaults fill a field the item leaves out, so that
// {operator: Equal} and no operator are the same toleration.
func keyOf(fields []string, defaults map[string]string) listKey {
	return func(item map[string]any) string {
		var b strings.Builder
		for _, f := range fields {
			s := scalarString(item[f])
			if s == "" {
				s = defaults[f]
			}
			b.WriteString(s)
			b.WriteByte(0)
		}
		return b.String()
	}
}

func scalarString(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	case bool:
		if t {
			return "true"
		}
		return "false"
	}
	return ""
}

// podLists are the pod lists merged by key (SPEC §3; strategic-merge-patch keys otherwise).
// Field names are unambiguous inside a pod, so the name alone selects the rule.
var podLists = map[string]listKey{
	"env":                       keyOf([]string{"name"}, nil),
	"volumeMounts":              keyOf([]string{"mountPath"}, nil),
	"volumeDevices":             keyOf([]string{"devicePath"}, nil),
	"ports":                     keyOf([]string{"containerPort", "protocol"}, map[string]string{"protocol": "TCP"}),
	"resizePolicy":              keyOf([]string{"resourceName"}, nil),
	"claims":                    keyOf([]string{"name"}, nil),
	"volumes":                   keyOf([]string{"name"}, nil),
	"imagePullSecrets":          keyOf([]string{"name"}, nil),
	"hostAliases":               keyOf([]string{"ip"}, nil),
	"readinessGates":            keyOf([]string{"conditionType"}, nil),
	"schedulingGates":           keyOf([]string{"name"}, nil),
	"resourceClaims":            keyOf([]string{"name"}, nil),
	"topologySpreadConstraints": keyOf([]string{"topologyKey", "whenUnsatisfiable"}, nil),
	"tolerations": keyOf([]string{"key", "operator", "value", "effect"},
		map[string]string{"operator": "Equal"}),
}

// serviceLists are the Service lists merged by key.
var serviceLists = map[string]listKey{
	"ports": keyOf([]string{"port", "protocol"}, map[string]string{"protocol": "TCP"}),
}

// containerLists are merged by name with the "*" wildcard and the sidecar rule.
var containerLists = map[string]bool{"containers": true, "initContainers": true, "ephemeralContainers": true}

// merger applies one patch to an object tree in place. In fill mode (policies with
// `mode: default`) the patch only sets what the object leaves unset; otherwise it overrides.
type merger struct {
	lists map[string]listKey
	pod   bool
	fill  bool
}

func newMerger(kind Kind, fill bool) merger {
	if kind == KindService {
		return merger{lists: serviceLists, fill: fill}
	}
	return merger{lists: podLists, pod: true, fill: fill}
}

// mergeMap merges every member of patch into dst.
func (m merger) mergeMap(dst, patch map[string]any) {
	for k, pv := range patch {
		m.mergeEntry(dst, k, pv)
	}
}

// mergeEntry merges one member. A null patch value removes the key (override mode only); a
// null object value counts as unset.
func (m merger) mergeEntry(dst map[string]any, k string, pv any) {
	dv, present := dst[k]
	if present && dv == nil {
		present = false
	}
	if pv == nil {
		if !m.fill {
			delete(dst, k)
		}
		return
	}
	switch p := pv.(type) {
	case map[string]any:
		d, ok := dv.(map[string]any)
		switch {
		case !present:
			d = map[string]any{}
			m.mergeObject(k, d, p)
			if len(d) > 0 || len(p) == 0 {
				dst[k] = d
			}
		case ok:
			m.mergeObject(k, d, p)
		case !m.fill: // a different type in the object: the patch wins
			dst[k] = clean(p)
		}
	case []any:
		d, ok := dv.([]any)
		if present && !ok {
			if !m.fill {
				dst[k] = clean(p)
			}
			return
		}
		merged, keyed := m.mergeList(k, d, p)
		switch {
		case !keyed: // lists without a merge key are replaced, as strategic merge does
			if !present || !m.fill {
				dst[k] = clean(p)
			}
		case present || len(merged) > 0:
			dst[k] = merged
		}
	default:
		if !present || !m.fill {
			dst[k] = pv
		}
	}
}

// mergeObject merges a nested object, with the special rules of pod affinity.
func (m merger) mergeObject(k string, dst, patch map[string]any) {
	if m.pod && k == "affinity" {
		m.mergeAffinity(dst, patch)
		return
	}
	m.mergeMap(dst, patch)
}

// mergeList merges lists that have a merge key; keyed is false for lists to be replaced.
func (m merger) mergeList(k string, dst, patch []any) (out []any, keyed bool) {
	if m.pod && containerLists[k] {
		return m.mergeContainers(dst, patch), true
	}
	if key, ok := m.lists[k]; ok {
		return m.mergeKeyed(dst, patch, key), true
	}
	return nil, false
}

// mergeKeyed merges items with the same key and appends the others.
func (m merger) mergeKeyed(dst, patch []any, key listKey) []any {
	for _, it := range patch {
		pm, ok := it.(map[string]any)
		if !ok {
			continue
		}
		if i := findKey(dst, key, key(pm)); i >= 0 {
			if dm, ok := dst[i].(map[string]any); ok {
				m.mergeMap(dm, pm)
				continue
			}
		}
		dst = append(dst, clean(pm))
	}
	return dst
}

func findKey(list []any, key listKey, want string) int {
	for i, it := range list {
		if im, ok := it.(map[string]any); ok && key(im) == want {
			return i
		}
	}
	return -1
}

var byName = keyOf([]string{"name"}, nil)

// mergeContainers merges containers by name. "*" applies to every container the list had
// before this patch; a named container the object lacks is appended only when the patch
// gives a whole container (it has an image), never as a broken partial one. A named entry is
// more specific than "*": it is applied after "*" when overriding and before it when filling.
func (m merger) mergeContainers(dst, patch []any) []any {
	existing := len(dst)
	stars := func() {
		for _, it := range patch {
			pm, ok := it.(map[string]any)
			if !ok || pm["name"] != "*" {
				continue
			}
			for _, c := range dst[:existing] {
				cm, ok := c.(map[string]any)
				if !ok {
					continue
				}
				for k, v := range pm {
					if k != "name" {
						m.mergeEntry(cm, k, v)
					}
				}
			}
		}
	}
	if !m.fill {
		stars()
	}
	var sidecars []any
	for _, it := range patch {
		pm, ok := it.(map[string]any)
		if !ok || pm["name"] == "*" {
			continue
		}
		if i := findKey(dst, byName, byName(pm)); i >= 0 {
			if cm, ok := dst[i].(map[string]any); ok {
				m.mergeMap(cm, pm)
			}
			continue
		}
		if _, whole := pm["image"]; whole {
			sidecars = append(sidecars, clean(pm))
		}
	}
	if m.fill {
		stars()
	}
	return append(dst, sidecars...)
}

// mergeAffinity applies SPEC §3's affinity rules: a policy's required node selector
// requirements are ANDed into every term of the object; preferred terms and pod
// (anti-)affinity terms are unioned.
func (m merger) mergeAffinity(dst, patch map[string]any) {
	for k, pv := range patch {
		pm, ok := pv.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if !ok || !dok || (k != "nodeAffinity" && k != "podAffinity" && k != "podAntiAffinity") {
			m.mergeEntry(dst, k, pv)
			continue
		}
		for field, fv := range pm {
			switch {
			case k == "nodeAffinity" && field == "requiredDuringSchedulingIgnoredDuringExecution":
				m.andNodeSelector(dm, field, fv)
			case strings.HasSuffix(field, "DuringSchedulingIgnoredDuringExecution"):
				m.union(dm, field, fv)
			default:
				m.mergeEntry(dm, field, fv)
			}
		}
	}
}

// andNodeSelector ANDs the policy's single node selector term into every term of the object.
// A requirement on a key the term already constrains replaces it when overriding and is
// left out when filling.
func (m merger) andNodeSelector(dst map[string]any, field string, pv any) {
	pSel, ok := pv.(map[string]any)
	dSel, dok := dst[field].(map[string]any)
	pTerms, _ := pSel["nodeSelectorTerms"].([]any)
	dTerms, _ := dSel["nodeSelectorTerms"].([]any)
	if !ok || !dok || len(pTerms) != 1 || len(dTerms) == 0 {
		m.mergeEntry(dst, field, pv)
		return
	}
	pTerm, _ := pTerms[0].(map[string]any)
	for _, t := range dTerms {
		term, ok := t.(map[string]any)
		if !ok {
			continue
		}
		for _, list := range []string{"matchExpressions", "matchFields"} {
			reqs, _ := pTerm[list].([]any)
			if len(reqs) == 0 {
				continue
			}
			existing, _ := term[list].([]any)
			for _, r := range reqs {
				rm, ok := r.(map[string]any)
				if !ok {
					continue
				}
				i := findKey(existing, byKey, byKey(rm))
				switch {
				case i < 0:
					existing = append(existing, clean(rm))
				case !m.fill:
					existing[i] = clean(rm)
				}
			}
			term[list] = existing
		}
	}
}

var byKey = keyOf([]string{"key"}, nil)

// union appends the patch's items that the object's list does not already hold.
func (m merger) union(dst map[string]any, field string, pv any) {
	pl, ok := pv.([]any)
	dl, dok := dst[field].([]any)
	if !ok || !dok {
		m.mergeEntry(dst, field, pv)
		return
	}
	seen := make(map[string]bool, len(dl))
	for _, it := range dl {
		seen[canonical(it)] = true
	}
	for _, it := range pl {
		if c := canonical(it); !seen[c] {
			seen[c] = true
			dl = append(dl, clean(it))
		}
	}
	dst[field] = dl
}

// canonical is a stable text form of a value (object keys sorted), for equality.
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil { // generic JSON trees always marshal
		return ""
	}
	return string(b)
}

// clean deep-copies a patch value for insertion into an object, dropping null members (they
// remove keys, and there is nothing to remove in a new value). Policies are shared and
// immutable, so nothing of theirs may be aliased into an object.
func clean(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if x != nil {
				out[k] = clean(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = clean(x)
		}
		return out
	default:
		return v
	}
}
