package policies

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// lintValidity reports what `lint` can know offline about reference §8's rules, with the rules
// admission runs (package validity): the policy is applied, by the merge admission uses, to a
// synthetic object of every manager and role it can select, one that holds nothing but what
// every such object has (its recognition labels, a main container, a Service port) and the
// containers the policy's partial entries name, so that every entry applies. Reported are the
// violations the policy brings to every one of them (validity.Fresh against the object as
// given) of the rules a policy must get right by itself (validity.Own), at the policy's own
// fields. What the object or the cluster may complete or contradict is decided at admission,
// where such a policy is left out instead. The work is bounded: an apply and a check of a
// small object per manager and role, whatever the policy holds. A field already in reported
// (the policy's other problems) is not named again.
func lintValidity(p *Policy, fld *field.Path, reported field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, duplicateClaims(p.Patch(profiles.KindPod), fld.Child("template"))...)
	for _, part := range []struct {
		kind profiles.Kind
		name string
	}{{profiles.KindPod, "template"}, {profiles.KindService, "service"}} {
		if patch := p.Patch(part.kind); patch != nil {
			errs = append(errs, lintPart(p, part.kind, patch, fld.Child(part.name))...)
		}
	}
	named := make(map[string]bool, len(reported)+len(errs))
	for _, e := range reported {
		named[e.Field] = true
	}
	return slices.DeleteFunc(errs, func(e *field.Error) bool {
		seen := named[e.Field]
		named[e.Field] = true
		return seen
	})
}

// lintPart is lintValidity for one part of a policy, patch, at fld: the own violations it
// brings to every synthetic object of its kind.
func lintPart(p *Policy, kind profiles.Kind, patch map[string]any, fld *field.Path) field.ErrorList {
	var common map[string]*field.Error // path and message → error: those found on every object
	for _, tg := range lintTargets(p) {
		var found map[string]*field.Error
		raw := tg.object(kind, patch)
		t := jsontree.New()
		obj, _ := t.Decode(json.RawMessage(raw)).(map[string]any)
		st := &applyState{t: t}
		if kind == profiles.KindPod {
			// As applyLayers does; a platform policy's whole containers would replace the
			// object's of their names, and the synthetic object has none of those.
			m := newMerger(st, kind, false)
			m.manager = tg.profile.Manager
			m.insertSidecars(obj, patch, nil)
		}
		m := newMerger(st, kind, p.Mode == ModeDefault)
		m.manager = tg.profile.Manager
		m.mergeMap(obj, patch)
		var own []validity.Own
		if st.err == nil { // else admission leaves the object unpatched
			env := &validity.Env{Service: kind == profiles.KindService, Namespace: lintNamespace}
			own = env.Own(obj, raw)
		}
		if len(own) > 0 {
			jsontree.ExpandAll(obj) // a small object: its places are read in plain maps and lists
			pl := &placer{kind: kind, obj: obj, t: t, manager: tg.profile.Manager}
			found = make(map[string]*field.Error, len(own))
			for _, o := range own {
				at, held, ok := pl.place(patch, o.At, o.By, fld)
				if !ok {
					continue
				}
				e := field.Forbidden(at, o.Message) // a value the policy sets
				if !held {
					e = field.Required(at, o.Message) // one it leaves out
				}
				found[e.Field+"\x00"+e.Detail] = e
			}
		}
		if common != nil {
			maps.DeleteFunc(common, func(k string, _ *field.Error) bool { return found[k] == nil })
		} else {
			common = found
		}
		if len(common) == 0 {
			return nil
		}
	}
	errs := slices.Collect(maps.Values(common))
	slices.SortFunc(errs, func(a, b *field.Error) int {
		return strings.Compare(a.Field+"\x00"+a.Detail, b.Field+"\x00"+b.Detail)
	})
	return errs
}

// lintNamespace is the namespace of the synthetic objects.
const lintNamespace = "default"

// lintTarget is a manager and one of its role names, with the JSON of its synthetic Pod and
// Service (syntheticObject).
type lintTarget struct {
	profile      *profiles.Profile
	role         string
	pod, service []byte
}

// lintAll are the synthetic objects of every manager and role, in profile order.
var lintAll = func() []lintTarget {
	var out []lintTarget
	for i := range lintProfiles {
		for _, role := range slices.Sorted(maps.Keys(lintProfiles[i].Roles)) {
			tg := lintTarget{profile: &lintProfiles[i], role: role}
			tg.pod, tg.service = syntheticObject(profiles.KindPod, tg, nil), syntheticObject(profiles.KindService, tg, nil)
			out = append(out, tg)
		}
	}
	return out
}()

// lintProfiles are the managers' profiles lint makes synthetic objects of, copied once.
var lintProfiles = profiles.All()

// lintTargets are the managers and roles a policy can select; all of them for a policy that
// can select none (its values are checked all the same).
func lintTargets(p *Policy) []lintTarget {
	var out []lintTarget
	for _, tg := range lintAll {
		if (len(p.match.managers) == 0 || slices.Contains(p.match.managers, tg.profile.Manager)) &&
			(len(p.match.roles) == 0 || slices.Contains(p.match.roles, tg.profile.Roles[tg.role])) {
			out = append(out, tg)
		}
	}
	if len(out) == 0 {
		return lintAll
	}
	return out
}

// object is the JSON of the target's synthetic object of a kind for a patch.
func (tg lintTarget) object(kind profiles.Kind, patch map[string]any) []byte {
	switch {
	case kind == profiles.KindService:
		return tg.service
	case partialEntries(patch):
		return syntheticObject(kind, tg, patch)
	}
	return tg.pod
}

// Names of the synthetic containers: not DNS labels, so no policy entry names them.
const (
	lintMainContainer = "podpatch.main"
	lintInitContainer = "podpatch.init"
)

// syntheticObject is the JSON of a Pod or Service of a manager and role holding what every such
// object holds: the labels it is recognised by and a main container (a Pod) or a port on the
// manager's UI port (a Service); a Pod also has a container for each partial entry of the patch
// (each named container the patch does not add whole) and an init container when the patch
// has a "*" init entry, so that every entry applies.
func syntheticObject(kind profiles.Kind, tg lintTarget, patch map[string]any) []byte {
	pr := tg.profile
	labels := map[string]any{pr.RoleKey: tg.role}
	if pr.RequireKey != "" {
		labels[pr.RequireKey] = pr.RequireValue
	}
	meta := map[string]any{"name": "podpatch-lint", "namespace": lintNamespace, "labels": labels}
	var obj map[string]any
	if kind == profiles.KindService {
		port := map[string]any{"name": pr.UI.Names[0], "port": pr.UI.Numbers[0], "protocol": "TCP"}
		obj = map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": meta,
			"spec": map[string]any{"selector": labels, "ports": []any{port}}}
	} else {
		spec := map[string]any{"containers": []any{map[string]any{"name": lintMainContainer, "image": "podpatch-lint"}}}
		eachPartialEntry(patch, func(list, name string) {
			have, _ := spec[list].([]any)
			spec[list] = append(have, map[string]any{"name": name, "image": "podpatch-lint"})
		})
		obj = map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
	}
	raw, _ := json.Marshal(obj) // strings, numbers and maps only: it cannot fail
	return raw
}

// eachPartialEntry calls f with the list and name of the container each partial entry of a pod
// patch applies to: a named entry without an image, and, for a "*" init entry, the synthetic
// init container.
func eachPartialEntry(patch map[string]any, f func(list, name string)) {
	pspec, _ := patch["spec"].(map[string]any)
	for _, list := range []string{"containers", "initContainers"} {
		entries, _ := pspec[list].([]any)
		for _, it := range entries {
			pm, _ := it.(map[string]any)
			name, _ := pm["name"].(string)
			if _, whole := pm["image"]; whole || name == "" || name == mainContainerName {
				continue
			}
			if name == wildcardContainer {
				if list == "containers" {
					continue // the main container
				}
				name = lintInitContainer
			}
			f(list, name)
		}
	}
}

// partialEntries reports whether a pod patch has an entry eachPartialEntry adds a container for.
func partialEntries(patch map[string]any) bool {
	found := false
	eachPartialEntry(patch, func(string, string) { found = true })
	return found
}

// duplicateClaims reports two resource claims of one name in a pod patch: entries merge by
// name, so they would be one entry, with the members of both.
func duplicateClaims(patch map[string]any, fld *field.Path) field.ErrorList {
	spec, _ := patch["spec"].(map[string]any)
	claims, _ := spec["resourceClaims"].([]any)
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, it := range claims {
		pm, _ := it.(map[string]any)
		name := byName.Of(pm)
		if seen[name] {
			errs = append(errs, field.Duplicate(fld.Child("spec", "resourceClaims").Index(i).Child("name"), strings.TrimSuffix(name, "\x00")))
		}
		seen[name] = true
	}
	return errs
}

// placeSegment is one step of a place by position: a member, a map key ([name]) or a list
// item ([index]).
type placeSegment struct {
	name  string
	key   bool
	index int // -1: a member or key
}

// placeSegments splits a place by position (spec.containers[0].resources.limits[nvidia.com/gpu]):
// a bracketed number is a list item, any other bracketed text a map key.
func placeSegments(at string) []placeSegment {
	var out []placeSegment
	for at != "" {
		switch at[0] {
		case '.':
			at = at[1:]
		case '[':
			end := strings.IndexByte(at, ']')
			if end < 0 {
				end = len(at)
			}
			s := at[1:end]
			at = at[min(end+1, len(at)):]
			if n, err := strconv.Atoi(s); err == nil && n >= 0 {
				out = append(out, placeSegment{index: n})
			} else {
				out = append(out, placeSegment{name: s, key: true, index: -1})
			}
		default:
			end := strings.IndexAny(at, ".[")
			if end < 0 {
				end = len(at)
			}
			out = append(out, placeSegment{name: at[:end], index: -1})
			at = at[end:]
		}
	}
	return out
}

// placer maps places of a patched synthetic object (validity.Own.At, by position) back to the
// fields of the policy's patch that wrote them.
type placer struct {
	kind    profiles.Kind
	obj     map[string]any // expanded
	t       *jsontree.Tree
	manager profiles.Manager
}

// place maps at to the field of patch, under fld, that wrote it. An item of a list the merge
// matches by key is the patch's entry of that key: of a container list, its named entry,
// "@main" for the main container or "*", the most specific of those that holds most of the
// place of the values that bring the violation (by; at when ""); of a list the patch replaced,
// the same index. A member or key is the same name, whether or not the patch holds it (a limit
// its request needs); held says whether it does. false when no one entry of the patch wrote an
// item: none (the object's own), or several of one key, merged (duplicateClaims).
func (pl *placer) place(patch map[string]any, at, by string, fld *field.Path) (_ *field.Path, held, ok bool) {
	segs, evidence := placeSegments(at), placeSegments(by)
	var pol, ob any = patch, pl.obj
	list := "" // the member the current value is
	for i, s := range segs {
		if s.index < 0 {
			if s.key {
				fld = fld.Key(s.name)
			} else {
				fld, list = fld.Child(s.name), s.name
			}
			pm, _ := pol.(map[string]any)
			om, _ := ob.(map[string]any)
			pol, ob = pm[s.name], om[s.name]
			continue
		}
		items, _ := ob.([]any)
		entries, _ := pol.([]any)
		if s.index >= len(items) {
			return nil, false, false
		}
		rest := segs[i+1:]
		if len(evidence) > i && slices.Equal(evidence[:i+1], segs[:i+1]) {
			rest = evidence[i+1:]
		}
		j := pl.entry(list, entries, items, s.index, rest)
		if j < 0 {
			return nil, false, false
		}
		fld, pol, ob = fld.Index(j), entries[j], items[s.index]
	}
	return fld, pol != nil, true
}

// entry finds the entry of a patch's list that wrote the object's item at index i (see place),
// rest being the place of the values within it; -1 for none.
func (pl *placer) entry(list string, entries, items []any, i int, rest []placeSegment) int {
	item, _ := items[i].(map[string]any)
	if pl.kind == profiles.KindPod && containerLists[list] {
		name := byName.Of(item)
		best, most := -1, -1
		for _, want := range [...]string{name, mainContainerName + "\x00", wildcardContainer + "\x00"} {
			if want == mainContainerName+"\x00" && (list != "containers" || mainContainer(pl.t, items, pl.manager)+"\x00" != name) {
				continue
			}
			for j, e := range entries {
				if em, _ := e.(map[string]any); em != nil && byName.Of(em) == want {
					if d := pl.depth(rest, e, item); d > most {
						best, most = j, d
					}
				}
			}
		}
		return best
	}
	lists := podLists
	if pl.kind == profiles.KindService {
		lists = serviceLists
	}
	if key, ok := lists[list]; ok {
		want, found := key.Of(item), -1
		for j, e := range entries {
			if em, _ := e.(map[string]any); em != nil && key.Of(em) == want {
				if found >= 0 {
					return -1 // several entries of one key, merged into one item
				}
				found = j
			}
		}
		return found
	}
	if i < len(entries) {
		return i // a list the patch replaced
	}
	return -1
}

// depth counts the leading steps of place at which a patch's value pol holds a value, ob being
// the object's value there.
func (pl *placer) depth(place []placeSegment, pol, ob any) int {
	list := ""
	for n, s := range place {
		if s.index < 0 {
			if !s.key {
				list = s.name
			}
			pm, _ := pol.(map[string]any)
			om, _ := ob.(map[string]any)
			pol, ob = pm[s.name], om[s.name]
		} else {
			items, _ := ob.([]any)
			entries, _ := pol.([]any)
			if s.index >= len(items) {
				return n
			}
			j := pl.entry(list, entries, items, s.index, place[n+1:])
			if j < 0 {
				return n
			}
			pol, ob = entries[j], items[s.index]
		}
		if pol == nil {
			return n
		}
	}
	return len(place)
}
