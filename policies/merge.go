package policies

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The merge rules of reference §3 (doc.go: merge), applied by apply.go one policy's patch at a
// time to the object's raw JSON tree: keyed lists merged item by item through an index, one-of
// groups, containers by name with "*" and "@main", the platform's sidecars, node affinity ANDed.

// listKey is the identity of a list item, for lists merged item by item: the values of some
// fields, or (whole) the item's canonical form, for lists unioned as sets.
type listKey struct {
	fields []string
	// defaults fill a field the item leaves out, so that {operator: Equal} and no operator are
	// the same toleration.
	defaults map[string]string
	whole    bool
}

func keyOf(fields []string, defaults map[string]string) listKey {
	return listKey{fields: fields, defaults: defaults}
}

// Of returns the key of a decoded item.
func (k listKey) Of(item map[string]any) string {
	if k.whole {
		return jsontree.Canonical(item)
	}
	var b strings.Builder
	for _, f := range k.fields {
		s := scalarString(jsontree.Expand(item[f]))
		if s == "" {
			s = k.defaults[f]
		}
		b.WriteString(s)
		b.WriteByte(0)
	}
	return b.String()
}

// OfRaw returns the key of an item still raw, without decoding it, so that indexing the long
// lists of a large object costs a scan and not a decode; false when it is not an object.
func (k listKey) OfRaw(raw json.RawMessage) (string, bool) {
	if k.whole {
		return jsontree.CanonicalObject(raw)
	}
	vals := make([]string, len(k.fields))
	if !jsontree.Members(raw, k.fields, func(i int, v jsontree.Scalar) { vals[i] = v.Text }) {
		return "", false
	}
	var b strings.Builder
	for i, f := range k.fields {
		if vals[i] == "" {
			vals[i] = k.defaults[f]
		}
		b.WriteString(vals[i])
		b.WriteByte(0)
	}
	return b.String(), true
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

// podLists are the pod lists merged by key (reference §3; strategic-merge-patch keys otherwise).
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

// containerListNames are containerLists in a fixed order, for a deterministic result.
var containerListNames = []string{"containers", "initContainers", "ephemeralContainers"}

// keyedList reports whether a list is one a patch merges item by item; any other list replaces the
// object's whole, an effect on every path below it (the namespace allow-list's Check).
func keyedList(name string) bool {
	_, pod := podLists[name]
	_, svc := serviceLists[name]
	return pod || svc || containerLists[name]
}

// merger applies one patch to an object tree in place. In fill mode (policies with
// `mode: default`) the patch only sets what the object leaves unset; otherwise it overrides.
type merger struct {
	lists map[string]listKey
	pod   bool
	fill  bool
	st    *applyState
	t     *jsontree.Tree
	// manager made the object: "@main" names its main container.
	manager profiles.Manager
	// owned are the containers platform policies add, which namespace policies' entries skip.
	owned map[string]bool
}

// applyState is what one Apply carries across its layers: the first error, which leaves the
// object unpatched, and the work done so far.
type applyState struct {
	t *jsontree.Tree
	// err is the first reason not to patch: a field whose shape differs from the patch's (a
	// string where a policy sets a list), too much work, or the request's budget.
	err error
	// work counts the nodes written into the object, bounded by maxMergeWork.
	work int
	done <-chan struct{}
	// yields are the one-of groups in which a default's member yielded to another the object
	// held (mergeOneOf), for switched.
	yields []yield
}

// yield is a one-of group in which a default's members (chosen) yielded: the object held another.
type yield struct {
	dst    map[string]any
	chosen []string
}

// switched reports whether a later layer switched a one-of group in which a default yielded to
// the default's own member: the object now holds it, so a second admission would fill the
// default's members under it where this one did not (reference §3's fixed point; Set.applyLayers
// then applies the layers once more).
func (st *applyState) switched() bool {
	for _, y := range st.yields {
		for _, k := range y.chosen {
			if y.dst[k] != nil {
				return true
			}
		}
	}
	return false
}

// stopped reports whether the apply must stop, recording why.
func (st *applyState) stopped() bool {
	if st.err != nil {
		return true
	}
	select {
	case <-st.done:
		st.err = ErrStopped
		return true
	default:
		return false
	}
}

func newMerger(st *applyState, kind profiles.Kind, fill bool) merger {
	if kind == profiles.KindService {
		return merger{lists: serviceLists, fill: fill, st: st, t: st.t}
	}
	return merger{lists: podLists, pod: true, fill: fill, st: st, t: st.t}
}

// shapeMismatch records that the object's field k has another shape than the patch's.
func (m merger) shapeMismatch(k string, dv, pv any) {
	if m.st.err == nil {
		m.st.err = fmt.Errorf("field %q: the object has %s where a policy sets %s", k, jsontree.TypeName(dv), jsontree.TypeName(pv))
	}
}

// deepCopy copies a JSON tree as it is, nulls included.
func deepCopy(v any) any {
	out, _ := jsontree.Copy(v, false)
	return out
}

// clean deep-copies a patch value for insertion into the object, dropping null members (they
// remove keys, and there is nothing to remove in a new value), and counts the work. Policies are
// shared and immutable, so nothing of theirs may be aliased into an object.
func (m merger) clean(v any) any {
	out, n := jsontree.Copy(v, true)
	m.count(n)
	return out
}

// count adds n values written into the object to the work, and stops the apply beyond
// maxMergeWork.
func (m merger) count(n int) {
	if m.st.work += n; m.st.work > maxMergeWork && m.st.err == nil {
		m.st.err = fmt.Errorf("%w: the policies would write more than %d values into the object", ErrTooLarge, maxMergeWork)
	}
}

// mergeMap merges every member of patch into dst.
func (m merger) mergeMap(dst, patch map[string]any) {
	for k, pv := range patch {
		m.mergeEntry(dst, k, pv)
	}
}

// oneOf lists, by the field that holds an object, groups of members of which the object may
// have only one: the source of a volume, value or valueFrom of an env var, the handler of a
// probe or lifecycle hook. The patch's choice replaces the object's when overriding (as
// strategic merge's retainKeys does) and yields to it when filling, so a merge never makes an
// object the API server would reject.
var oneOf = map[string][]string{
	"env":            {"value", "valueFrom"},
	"livenessProbe":  {"exec", "httpGet", "tcpSocket", "grpc"},
	"readinessProbe": {"exec", "httpGet", "tcpSocket", "grpc"},
	"startupProbe":   {"exec", "httpGet", "tcpSocket", "grpc"},
	"postStart":      {"exec", "httpGet", "tcpSocket", "sleep"},
	"preStop":        {"exec", "httpGet", "tcpSocket", "sleep"},
}

// mergeOneOf merges an object held by field, honouring its one-of group; volumes' group is
// every member but the name.
func (m merger) mergeOneOf(field string, dst, patch map[string]any) {
	group := oneOf[field]
	in := func(k string) bool { return slices.Contains(group, k) }
	if field == "volumes" {
		in = func(k string) bool { return k != "name" }
	}
	if group == nil && field != "volumes" {
		m.mergeMap(dst, patch)
		return
	}
	var chosen []string
	for k, v := range patch {
		if in(k) && v != nil {
			chosen = append(chosen, k)
		}
	}
	var held []string
	for k, v := range dst { // raw members are objects or lists, never null: no need to decode
		if in(k) && v != nil && !slices.Contains(chosen, k) {
			held = append(held, k)
		}
	}
	yielded := m.fill && len(chosen) > 0 && len(held) > 0
	if yielded {
		m.st.yields = append(m.st.yields, yield{dst, chosen})
	}
	for k, pv := range patch {
		if yielded && in(k) {
			continue // the object already chose another member: keep it
		}
		m.mergeEntry(dst, k, pv)
	}
	if len(chosen) > 0 && !m.fill {
		for _, k := range held {
			delete(dst, k)
		}
	}
}

// mergeEntry merges one member. A null patch value removes the key (override mode only); a
// null object value counts as unset.
func (m merger) mergeEntry(dst map[string]any, k string, pv any) {
	if m.st.err != nil {
		return
	}
	dv, present := m.t.Get(dst, k)
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
		default:
			m.shapeMismatch(k, dv, pv)
		}
	case []any:
		d, ok := dv.([]any)
		if present && !ok {
			m.shapeMismatch(k, dv, pv)
			return
		}
		merged, keyed := m.mergeList(k, d, p)
		switch {
		case !keyed: // lists without a merge key are replaced, as strategic merge does
			if !present || !m.fill {
				dst[k] = m.clean(p)
			}
		case present || len(merged) > 0:
			dst[k] = merged
		}
	default:
		switch dv.(type) {
		case map[string]any, []any:
			m.shapeMismatch(k, dv, pv)
		default:
			if !present || !m.fill {
				dst[k] = pv
				m.count(1)
			}
		}
	}
}

// mergeObject merges a nested object, with the special rules of pod affinity and one-of groups.
func (m merger) mergeObject(k string, dst, patch map[string]any) {
	switch {
	case m.pod && k == "affinity":
		m.mergeAffinity(dst, patch)
	case m.pod:
		m.mergeOneOf(k, dst, patch)
	default:
		m.mergeMap(dst, patch)
	}
}

// mergeList merges lists that have a merge key; keyed is false for lists to be replaced.
func (m merger) mergeList(k string, dst, patch []any) (out []any, keyed bool) {
	if m.pod && containerLists[k] {
		return m.mergeContainers(k, dst, patch), true
	}
	if key, ok := m.lists[k]; ok {
		return m.mergeKeyed(k, dst, patch, key), true
	}
	return nil, false
}

// mergeKeyed merges items with the same key, into every item of the object with that key, and
// appends the others. The object's items are found through an index kept for the whole apply,
// so merging is linear in both lists.
func (m merger) mergeKeyed(field string, dst, patch []any, key listKey) []any {
	idx := m.t.Index(dst, field, key)
	for _, it := range patch {
		pm, ok := it.(map[string]any)
		if !ok {
			continue
		}
		k := key.Of(pm)
		if idx.Has(k) {
			// Every definition of the key gets the patch, duplicates included (the API server
			// lets env, ports, imagePullSecrets, hostAliases, tolerations and readinessGates
			// carry them, and the kubelet reads the last of an env name): whichever one is
			// read, it is the policy's. Setting each, rather than removing the others, keeps
			// what reads an earlier one ($(VAR) between two definitions) and is a fixed point.
			merged := false
			idx.All(k, func(i int) {
				if dm, ok := m.t.At(dst, i).(map[string]any); ok {
					merged = true
					if m.pod {
						m.mergeOneOf(field, dm, pm)
					} else {
						m.mergeMap(dm, pm)
					}
				}
			})
			if merged {
				continue
			}
		}
		dst = append(dst, m.clean(pm))
		idx.Add(k, len(dst)-1)
	}
	m.t.Keep(dst, field, idx)
	return dst
}

var byName = keyOf([]string{"name"}, nil)

// mergeContainers merges containers by name. A named container the object lacks is appended
// only when the patch gives a whole container (it has an image), never as a broken partial
// one. "*" then applies to every container, sidecars included, so that re-invoking admission
// (which sees the sidecar as an existing container) gives the same pod; "@main" applies to the
// manager's main container (mainContainer). A named entry is more specific than "*": it is
// applied after "*" when overriding and before it when filling. Containers the platform adds are
// skipped by namespace policies (m.owned).
func (m merger) mergeContainers(list string, dst, patch []any) []any {
	dst = m.appendSidecars(list, dst, patch, nil)
	stars := func() {
		for _, it := range patch {
			pm, ok := it.(map[string]any)
			if !ok || pm["name"] != wildcardContainer {
				continue
			}
			for i := range dst {
				if m.st.stopped() {
					return
				}
				if cm, ok := m.t.At(dst, i).(map[string]any); ok && !m.owned[byName.Of(cm)] {
					m.mergeItem(cm, pm)
				}
			}
		}
	}
	if !m.fill {
		stars()
	}
	idx := m.t.Index(dst, "containers", byName)
	for _, it := range patch {
		pm, ok := it.(map[string]any)
		if !ok || pm["name"] == wildcardContainer {
			continue
		}
		name := byName.Of(pm)
		if pm["name"] == mainContainerName {
			if list != "containers" {
				continue
			}
			name = mainContainer(m.t, dst, m.manager) + "\x00"
		}
		if i, found := idx.Pos[name]; found && !m.owned[name] {
			if cm, ok := m.t.At(dst, i).(map[string]any); ok {
				m.mergeItem(cm, pm)
			}
		}
	}
	if m.fill {
		stars()
	}
	return dst
}

// mergeItem merges a container entry into a container, but for its name.
func (m merger) mergeItem(dst, patch map[string]any) {
	for k, v := range patch {
		if k != "name" {
			m.mergeEntry(dst, k, v)
		}
	}
}

// mainContainer names the manager's main container of a containers list: the one with the
// manager's conventional name, else the first (KubeRay always runs Ray in the first).
func mainContainer(t *jsontree.Tree, containers []any, manager profiles.Manager) string {
	first := ""
	for i := range containers {
		c, ok := t.At(containers, i).(map[string]any)
		if !ok {
			continue
		}
		name, _ := c["name"].(string)
		if first == "" {
			first = name
		}
		if profiles.IsMainContainer(manager, name) {
			return name
		}
	}
	return first
}

// sidecarNames adds to names the whole containers (with an image) a platform pod patch brings:
// the platform's containers. The manager's main container is never one (appendSidecars does
// not replace it), whatever entry names it.
func sidecarNames(patch map[string]any, names map[string]bool, manager profiles.Manager) map[string]bool {
	pspec, _ := patch["spec"].(map[string]any)
	for _, list := range containerListNames {
		pl, _ := pspec[list].([]any)
		for _, it := range pl {
			pm, ok := it.(map[string]any)
			if _, whole := pm["image"]; !ok || !whole || pm["name"] == wildcardContainer || pm["name"] == mainContainerName {
				continue
			}
			if list == "containers" && profiles.IsMainContainer(manager, scalarString(pm["name"])) {
				continue
			}
			if names == nil {
				names = map[string]bool{}
			}
			names[byName.Of(pm)] = true
		}
	}
	return names
}

// appendSidecars appends the whole containers (with an image) of patch that dst lacks.
//
// With placed (platform policies, before any layer), a whole container is the platform's: it
// also replaces, whole, a container of the same name the object arrived with, so that a pod
// that pre-declares the platform's sidecar keeps none of its own command, args, env or mounts
// in it (reference §3, "Platform-owned containers"). placed records, per list, the names placed in
// this admission: the first platform policy (in layer order) places a container, the others
// merge into it in their layers, as they would into one it appended. On re-invocation the
// object carries the sidecar as the first admission left it; replacing it with the same entry
// and applying the same layers again gives the same container. The manager's main container,
// by its conventional name (profiles.IsMainContainer), is never replaced: a whole entry for it sets
// its image and fields, as a partial one does.
func (m merger) appendSidecars(list string, dst, patch []any, placed map[string]bool) []any {
	var idx *jsontree.Index
	for _, it := range patch {
		pm, ok := it.(map[string]any)
		if !ok || pm["name"] == wildcardContainer || pm["name"] == mainContainerName {
			continue
		}
		if _, whole := pm["image"]; !whole {
			continue
		}
		if idx == nil {
			idx = m.t.Index(dst, "containers", byName)
		}
		k := byName.Of(pm)
		i, found := idx.Pos[k]
		switch {
		case !found:
			dst = append(dst, m.clean(pm))
			idx.Add(k, len(dst)-1)
		case placed == nil || placed[list+"\x00"+k]:
			continue
		case list == "containers" && profiles.IsMainContainer(m.manager, scalarString(pm["name"])):
		default:
			dst[i] = m.clean(pm)
		}
		if placed != nil {
			placed[list+"\x00"+k] = true
		}
	}
	if idx != nil {
		m.t.Keep(dst, "containers", idx)
	}
	return dst
}

// insertSidecars adds every sidecar a pod patch brings before any layer is applied, so that
// all layers, defaults included, see the same containers on first admission as on a re-invoked
// one. With placed (platform policies), a sidecar replaces a container of the same name the
// object arrived with (appendSidecars).
func (m merger) insertSidecars(pod, patch map[string]any, placed map[string]bool) {
	pspec, ok := patch["spec"].(map[string]any)
	if !ok {
		return
	}
	for _, list := range containerListNames {
		pl, ok := pspec[list].([]any)
		if !ok {
			continue
		}
		spec, ok := m.t.GetMap(pod, "spec")
		if !ok {
			spec = map[string]any{}
			pod["spec"] = spec
		}
		dv, _ := m.t.Get(spec, list)
		dl, ok := dv.([]any)
		if !ok && dv != nil {
			continue // not a list: leave the object's value to the merge rules
		}
		if out := m.appendSidecars(list, dl, pl, placed); len(out) > len(dl) {
			spec[list] = out
		}
	}
}

// mergeAffinity applies reference §3's affinity rules: a policy's required node selector
// requirements are ANDed into every term of the object; preferred terms and pod
// (anti-)affinity terms are unioned.
func (m merger) mergeAffinity(dst, patch map[string]any) {
	for k, pv := range patch {
		pm, ok := pv.(map[string]any)
		dm, dok := m.t.GetMap(dst, k)
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

// andNodeSelector ANDs the policy's single node selector term into every term of the object:
// each requirement the term does not already hold is added, so the object's own constraints
// keep holding too (reference §3). A default policy adds no requirement on a key the term already
// constrains: there the object has chosen. An object without terms gets the policy's.
func (m merger) andNodeSelector(dst map[string]any, field string, pv any) {
	pSel, ok := pv.(map[string]any)
	dSel, dok := m.t.GetMap(dst, field)
	pTerms, _ := pSel["nodeSelectorTerms"].([]any)
	var dTerms []any
	if dok {
		v, _ := m.t.Get(dSel, "nodeSelectorTerms")
		dTerms, _ = v.([]any)
	}
	if !ok || !dok || len(pTerms) != 1 {
		m.mergeEntry(dst, field, pv)
		return
	}
	if len(dTerms) == 0 {
		dSel["nodeSelectorTerms"] = m.clean(pTerms)
		return
	}
	pTerm, _ := pTerms[0].(map[string]any)
	for i := range dTerms {
		term, ok := m.t.At(dTerms, i).(map[string]any)
		if !ok {
			continue
		}
		for _, list := range []string{"matchExpressions", "matchFields"} {
			reqs, _ := pTerm[list].([]any)
			if m.fill {
				existing, _ := m.t.Get(term, list)
				reqs = slices.DeleteFunc(slices.Clone(reqs), func(r any) bool { return constrains(m.t, existing, r) })
			}
			if len(reqs) > 0 {
				m.union(term, list, reqs)
			}
		}
	}
}

// constrains reports whether a requirement list already has a requirement on req's key.
func constrains(t *jsontree.Tree, list, req any) bool {
	rm, _ := req.(map[string]any)
	l, _ := list.([]any)
	return t.Index(l, "requirements", byKey).Has(byKey.Of(rm))
}

var byKey = keyOf([]string{"key"}, nil)

// union appends the patch's items that the object's list does not already hold.
func (m merger) union(dst map[string]any, field string, pv any) {
	if pv == nil {
		return
	}
	pl, ok := pv.([]any)
	dv, _ := m.t.Get(dst, field)
	dl, dok := dv.([]any)
	if !ok || !dok {
		m.mergeEntry(dst, field, pv)
		return
	}
	idx := m.t.Index(dl, field, canonicalItem)
	for _, it := range pl {
		if c := jsontree.Canonical(it); !idx.Has(c) {
			dl = append(dl, m.clean(it))
			idx.Add(c, len(dl)-1)
		}
	}
	m.t.Keep(dl, field, idx)
	dst[field] = dl
}

// canonicalItem keys a list item by its whole value, for lists unioned as sets.
var canonicalItem = listKey{whole: true}
