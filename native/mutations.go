package native

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/podpatch/podpatch/internal/celtext"
)

// The mutation stage: a group's policies as JSONPatch expressions, the six layers' precedence
// (reference §3, "Layers and precedence") resolved when compiling. Each key of a string map,
// and each member of a toleration, gets one conditional chain: the last selected merge or
// enforce policy that writes it, else the object's own value, else the first selected default
// in the order the webhook fills (namespace defaults, then the platform's, each from the last
// in application order down). Every chain reads the object as it arrived (no compiled policy
// writes a label a compiled selection reads), so the result does not depend on the order of
// the MAPs or of their mutations. JSONPatch rather than ApplyConfiguration: an apply cannot
// remove a map key, and cannot leave a key out where a default yields to the object.

// member is a compiled policy in a group.
type member struct {
	ref      string  // provenance entry
	variable string  // the CEL variable of its selection: variables.pN
	part     podPart // what it writes
	fill     bool    // mode default: it fills what is unset
}

// piece is one part of a mutation's JSONPatch list and the policies it states.
type piece struct {
	expr string
	by   []*member
}

// order is a group's policies in the two orders the webhook applies them: the defaults that
// fill (first to set wins), and the merges and enforces that override (last wins).
type order struct{ fill, override []*member }

func sel(ms []*member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.variable
	}
	return out
}

// mapPieces states one string map of the Pod (labels, annotations, nodeSelector) key by key.
// The first piece creates the map when it is absent and a selected policy adds to it.
func mapPieces(path string, m labelsOf, get func(podPart) map[string]*string, o order) []piece {
	var keys []string
	var adders []*member
	for _, mb := range slices.Concat(o.fill, o.override) {
		for k, v := range get(mb.part) {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
			if v != nil && !slices.Contains(adders, mb) {
				adders = append(adders, mb)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	out := []piece{{expr: "(" + m.present() + " || !" + or(sel(adders)) + ` ? [] : [JSONPatch{op: "add", path: ` + celtext.Quote(path) + `, value: {}}])`, by: adders}}
	for _, k := range keys {
		p := celtext.Quote(path + "/" + pointer(k))
		add := func(v string) string {
			return `[JSONPatch{op: "add", path: ` + p + ", value: " + celtext.Quote(v) + "}]"
		}
		var b strings.Builder
		var by []*member
		for _, mb := range slices.Backward(o.override) {
			v, ok := get(mb.part)[k]
			if !ok {
				continue
			}
			by = append(by, mb)
			if v == nil {
				b.WriteString(mb.variable + " ? (" + m.has(k) + ` ? [JSONPatch{op: "remove", path: ` + p + "}] : []) : ")
			} else {
				b.WriteString(mb.variable + " ? " + add(*v) + " : ")
			}
		}
		b.WriteString(m.has(k) + " ? [] : ")
		for _, mb := range o.fill {
			if v := get(mb.part)[k]; v != nil {
				by = append(by, mb)
				b.WriteString(mb.variable + " ? " + add(*v) + " : ")
			}
		}
		b.WriteString("[]")
		out = append(out, piece{expr: "(" + b.String() + ")", by: by})
	}
	return out
}

// tolerationIDs is the variable holding the identities of the Pod's tolerations, in order.
const tolerationIDs = "tolerationIds"

// tolerationIDsExpression states tolerationID on each of the Pod's tolerations.
const tolerationIDsExpression = `has(object.spec.tolerations) ? object.spec.tolerations.map(t, ` +
	`(has(t.key) ? t.key : "") + "\x00" + (has(t.operator) && t.operator != "" ? t.operator : "Equal") + "\x00" + ` +
	`(has(t.value) ? t.value : "") + "\x00" + (has(t.effect) ? t.effect : "")) : []`

// appearance is one toleration of one policy.
type appearance struct {
	by  *member
	tol map[string]any
}

// tolerationPieces states the tolerations as a set (reference §3): a toleration the Pod holds is
// merged member by member, in place; one it lacks is appended once, where the first selected
// policy in application order would append it, with the members the layers give it.
func tolerationPieces(o order) []piece {
	var ids []string
	byID := map[string][]appearance{}
	var every []appearance // in application order
	var adders []*member
	for _, mb := range slices.Concat(o.fill, o.override) {
		for _, t := range mb.part.tolerations {
			id := tolerationID(t)
			if _, ok := byID[id]; !ok {
				ids = append(ids, id)
			}
			byID[id] = append(byID[id], appearance{mb, t})
			every = append(every, appearance{mb, t})
			if !slices.Contains(adders, mb) {
				adders = append(adders, mb)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	out := []piece{{expr: `(has(object.spec.tolerations) || !` + or(sel(adders)) +
		` ? [] : [JSONPatch{op: "add", path: "/spec/tolerations", value: []}])`, by: adders}}
	index := func(id string) string { return "variables." + tolerationIDs + ".indexOf(" + celtext.Quote(id) + ")" }
	// chain is a member's value for an identity: the last overriding appearance that has it,
	// else (held) the Pod's own, else the first filling one; each as want(literal), else none.
	chain := func(apps []appearance, member string, held, want func(string) string, none string) string {
		var b strings.Builder
		for _, a := range slices.Backward(apps) {
			if v, ok := a.tol[member]; ok && !a.by.fill {
				lv, _ := scalar(v)
				b.WriteString(a.by.variable + " ? " + want(lv) + " : ")
			}
		}
		if held != nil {
			b.WriteString(held(member))
		}
		for _, a := range apps {
			if v, ok := a.tol[member]; ok && a.by.fill {
				lv, _ := scalar(v)
				b.WriteString(a.by.variable + " ? " + want(lv) + " : ")
			}
		}
		b.WriteString(none)
		return "(" + b.String() + ")"
	}
	membersOf := func(apps []appearance) []string {
		var members []string
		for _, a := range apps {
			for k := range a.tol {
				if !slices.Contains(members, k) {
					members = append(members, k)
				}
			}
		}
		slices.Sort(members)
		return members
	}
	whoSet := func(apps []appearance) []*member {
		by := make([]*member, len(apps))
		for i, a := range apps {
			by[i] = a.by
		}
		return by
	}
	// Held: each member the layers give it, in place.
	for _, id := range ids {
		apps := byID[id]
		idx := index(id)
		at := "object.spec.tolerations[" + idx + "]"
		var inPlace []string
		for _, mem := range membersOf(apps) {
			path := `"/spec/tolerations/" + string(` + idx + `) + ` + celtext.Quote("/"+mem)
			inPlace = append(inPlace, chain(apps, mem,
				func(m string) string { return "has(" + at + "." + m + ") ? [] : " },
				func(v string) string { return `[JSONPatch{op: "add", path: ` + path + ", value: " + v + "}]" }, "[]"))
		}
		out = append(out, piece{expr: "(" + idx + " >= 0 && " + or(sel(whoSet(apps))) + " ? " + strings.Join(inPlace, " + ") + " : [])", by: whoSet(apps)})
	}
	// Lacked: appended where the first selected appearance of its identity stands in
	// application order; one chain per identity, the appends sorted by it.
	var lacked []string
	for _, id := range ids {
		apps := byID[id]
		var at strings.Builder
		for _, a := range apps {
			at.WriteString(a.by.variable + " ? " + strconv.Itoa(slices.IndexFunc(every, func(e appearance) bool {
				return e.by == a.by && tolerationID(e.tol) == id
			})) + " : ")
		}
		at.WriteString("-1")
		var fields []string
		for _, mem := range membersOf(apps) {
			fields = append(fields, `?`+celtext.Quote(mem)+": "+chain(apps, mem, nil,
				func(v string) string { return "optional.of(dyn(" + v + "))" }, "optional.none()"))
		}
		lacked = append(lacked, onlySelected(sel(whoSet(apps)), `{"at": dyn(`+at.String()+`), "held": dyn(`+index(id)+` >= 0), "value": dyn({`+strings.Join(fields, ", ")+`})}`))
	}
	out = append(out, piece{expr: "([" + strings.Join(lacked, ", ") + `].filter(x, int(x.at) >= 0 && !x.held).sortBy(x, int(x.at)).map(x, ` +
		`JSONPatch{op: "add", path: "/spec/tolerations/-", value: x.value}))`, by: adders})
	return out
}

// provenancePiece states podpatch.io/applied (reference §3, "Provenance"): every selected
// policy's entry, in layer order, whenever one is selected.
func provenancePiece(layered []*member, key string) piece {
	var refs []string
	for _, m := range layered {
		refs = append(refs, "("+m.variable+" ? ["+celtext.Quote(m.ref)+"] : [])")
	}
	selected := or(sel(layered))
	// The annotations' own pieces, before this one, create the map when one of their writers
	// is selected: it is created once, or the later creation would replace what they added.
	var annotators []*member
	for _, m := range layered {
		for _, v := range m.part.annotations {
			if v != nil {
				annotators = append(annotators, m)
				break
			}
		}
	}
	created := "has(object.metadata.annotations)"
	if len(annotators) > 0 {
		created += " || " + or(sel(annotators))
	}
	expr := "(" + selected + " ? (" + created + " ? [] : " +
		`[JSONPatch{op: "add", path: "/metadata/annotations", value: {}}]) + ` +
		`[JSONPatch{op: "add", path: ` + celtext.Quote("/metadata/annotations/"+pointer(key)) + ", value: (" +
		strings.Join(refs, " + ") + `).join(",")}] : [])`
	return piece{expr: expr, by: layered}
}

// requiredPath is where the required node affinity stands in a Pod.
const requiredPath = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"

// requiredCEL is the required node affinity in CEL, and the guard that the Pod has terms.
const (
	requiredCEL = "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	hasTerms    = "(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && has(" + requiredCEL + ") && has(" +
		requiredCEL + ".nodeSelectorTerms) && size(" + requiredCEL + ".nodeSelectorTerms) > 0)"
)

// variable is a CEL variable of a group's MAP.
type variable struct{ name, expression string }

// affinityPieces states the required node affinity (reference §3, Merge rules): each selected
// policy's requirements ANDed into every term of the Pod, in application order, a requirement a
// term holds not added again, and a default's requirement on a key the term already constrains
// left out (policies' andNodeSelector); a Pod without terms gets the one the policies make.
// A default's requirement is kept only when its policy is the first selected default to
// constrain that key (a variable per key), so each requirement's place is one chain and the
// appends, sorted by it, grow with the requirements and not with their square.
func affinityPieces(o order) ([]piece, []variable) {
	type req struct {
		by      *member
		literal string
		key, op string
		values  []string
		at      int // its place among every requirement of its list, in application order
		first   int // the place of its policy's first requirement on its key in its list
	}
	apps := map[string][]req{} // by list, in application order
	var by []*member
	for _, mb := range slices.Concat(o.fill, o.override) {
		if mb.part.required == nil {
			continue
		}
		by = append(by, mb)
		for _, list := range requirementLists {
			for _, r := range mb.part.required[list] {
				key, _ := r["key"].(string)
				op, _ := r["operator"].(string)
				var values []string
				vals, _ := r["values"].([]any)
				for _, v := range vals {
					s, _ := v.(string)
					values = append(values, s)
				}
				first := len(apps[list])
				for _, e := range apps[list] {
					if e.by == mb && e.key == key {
						first = e.at
						break
					}
				}
				apps[list] = append(apps[list], req{mb, requirementLiteral(r), key, op, values, len(apps[list]), first})
			}
		}
	}
	if len(by) == 0 {
		return nil, nil
	}
	// firstFill names, per list and key, the place of the first selected default's first
	// requirement on that key: the one default whose requirements on it a term without the key
	// takes (all of them: a policy's own are filtered against the term as it was before it).
	var vars []variable
	firstFill := map[string]string{}
	for _, list := range requirementLists {
		var keys []string
		chains := map[string]*strings.Builder{}
		for _, r := range apps[list] {
			if !r.by.fill || r.first != r.at {
				continue // the policy's requirements on a key stand or fall together
			}
			b, ok := chains[r.key]
			if !ok {
				b = &strings.Builder{}
				chains[r.key] = b
				keys = append(keys, r.key)
			}
			b.WriteString(r.by.variable + " ? " + strconv.Itoa(r.at) + " : ")
		}
		for _, k := range keys {
			name := fmt.Sprintf("affinityFill%d", len(vars))
			vars = append(vars, variable{name, chains[k].String() + "-1"})
			firstFill[list+"\x00"+k] = "variables." + name
		}
	}
	// appends is, for one list of a term (its CEL, "" for none), its requirements the term
	// lacks, each once, in application order.
	appends := func(list, term string) string {
		holds := func(r req) string {
			if term == "" {
				return "false"
			}
			return "(has(" + term + "." + list + ") && " + term + "." + list + ".exists(x, x.key == " + celtext.Quote(r.key) +
				" && x.operator == " + celtext.Quote(r.op) + " && (has(x.values) ? x.values : []) == " + celtext.Quotes(r.values) + "))"
		}
		keyHeld := func(key string) string {
			if term == "" {
				return "false"
			}
			return "(has(" + term + "." + list + ") && " + term + "." + list + ".exists(x, x.key == " + celtext.Quote(key) + "))"
		}
		kept := func(r req) string {
			if !r.by.fill {
				return r.by.variable
			}
			return "(" + firstFill[list+"\x00"+r.key] + " == " + strconv.Itoa(r.first) + " && !" + keyHeld(r.key) + ")"
		}
		var literals []string
		byLiteral := map[string][]req{}
		for _, r := range apps[list] {
			if _, ok := byLiteral[r.literal]; !ok {
				literals = append(literals, r.literal)
			}
			byLiteral[r.literal] = append(byLiteral[r.literal], r)
		}
		var entries []string
		for _, l := range literals {
			var at strings.Builder
			for _, r := range byLiteral[l] {
				at.WriteString(kept(r) + " ? " + strconv.Itoa(r.at) + " : ")
			}
			var writers []string
			for _, r := range byLiteral[l] {
				writers = append(writers, r.by.variable)
			}
			entries = append(entries, onlySelected(writers, `{"at": dyn(`+at.String()+`-1), "held": dyn(`+holds(byLiteral[l][0])+`), "value": dyn(`+l+`)}`))
		}
		return "[" + strings.Join(entries, ", ") + "].filter(x, int(x.at) >= 0 && !x.held).sortBy(x, int(x.at))"
	}
	// The Pod's terms, each in place.
	var inTerm []string
	for _, list := range requirementLists {
		if len(apps[list]) == 0 {
			continue
		}
		var adders []string
		for _, r := range apps[list] {
			adders = append(adders, r.by.variable)
		}
		path := `"` + requiredPath + `/nodeSelectorTerms/" + string(ti) + "/` + list + `"`
		inTerm = append(inTerm, "(has(term."+list+") || !"+or(adders)+` ? [] : [JSONPatch{op: "add", path: `+path+`, value: []}])`,
			appends(list, "term")+`.map(x, JSONPatch{op: "add", path: `+path+` + "/-", value: x.value})`)
	}
	out := []piece{{expr: "(" + hasTerms + " ? " + requiredCEL + ".nodeSelectorTerms.transformList(ti, term, " +
		strings.Join(inTerm, " + ") + ").flatten() : [])", by: by}}
	// A Pod without terms: the one term the selected policies make, in application order.
	var members []string
	for _, list := range requirementLists {
		if len(apps[list]) == 0 {
			continue
		}
		members = append(members, celtext.Quote(list)+": "+appends(list, "")+".map(x, x.value)")
	}
	out = append(out, piece{expr: "(!" + hasTerms + " && " + or(sel(by)) + " ? " +
		`(has(object.spec.affinity) ? [] : [JSONPatch{op: "add", path: "/spec/affinity", value: {}}]) + ` +
		`(has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) ? [] : [JSONPatch{op: "add", path: "/spec/affinity/nodeAffinity", value: {}}]) + ` +
		`[JSONPatch{op: "add", path: ` + celtext.Quote(requiredPath) + `, value: {"nodeSelectorTerms": [{` + strings.Join(members, ", ") + `}]}}] : [])`, by: by})
	return out, vars
}

// mainName is the variable naming the manager's main container (reference §3, "@main").
const mainName = "mainName"

// mainNameExpression is policies' mainContainer: the first container with one of the manager's
// conventional names, else the first container.
func mainNameExpression(names []string) string {
	first := "(size(object.spec.containers) > 0 ? object.spec.containers[0].name : \"\")"
	if len(names) == 0 {
		return first
	}
	return "object.spec.containers.exists(c, c.name in " + celtext.Quotes(names) + ") ? object.spec.containers.filter(c, c.name in " +
		celtext.Quotes(names) + ")[0].name : " + first
}

// targets is `the container c is one the entry names`.
func targets(entry, c string) string {
	switch entry {
	case "*":
		return "true"
	case "@main":
		return c + ".name == variables." + mainName
	}
	return c + ".name == " + celtext.Quote(entry)
}

// envPieces states the env variables of spec.containers by name (reference §3): in every
// container, a variable it holds gets its value from the layers in place (a merge's value in
// place of the container's source), one it lacks is
// appended once, where the first selected entry in application order would append it. Inside a
// policy, "*" comes before the named entries when overriding, after them when filling.
func envPieces(o order) []piece {
	type app struct {
		by    *member
		entry string
		v     envVar
	}
	var apps []app
	var by []*member
	for _, mb := range slices.Concat(o.fill, o.override) {
		var stars, named []containerEntry
		for _, e := range mb.part.containers {
			if e.name == "*" {
				stars = append(stars, e)
			} else {
				named = append(named, e)
			}
		}
		entries := slices.Concat(stars, named)
		if mb.fill {
			entries = slices.Concat(named, stars)
		}
		for _, e := range entries {
			for _, v := range e.env {
				apps = append(apps, app{mb, e.name, v})
			}
		}
		if len(entries) > 0 {
			by = append(by, mb)
		}
	}
	if len(apps) == 0 {
		return nil
	}
	on := func(a app) string { return "(" + a.by.variable + " && " + targets(a.entry, "c") + ")" }
	var names []string
	byName := map[string][]app{}
	var anyOn []string
	for _, a := range apps {
		if _, ok := byName[a.v.name]; !ok {
			names = append(names, a.v.name)
		}
		byName[a.v.name] = append(byName[a.v.name], a)
		anyOn = append(anyOn, on(a))
	}
	env := `"/spec/containers/" + string(ci) + "/env"`
	index := func(n string) string {
		return "(has(c.env) ? c.env.map(e, e.name).indexOf(" + celtext.Quote(n) + ") : -1)"
	}
	// value is the layers' value of a variable: the last overriding entry, else (held) the
	// container's own, else the first filling one.
	value := func(as []app, held, want func(string) string, none string) string {
		var b strings.Builder
		for _, a := range slices.Backward(as) {
			if !a.by.fill {
				b.WriteString(on(a) + " ? " + want(celtext.Quote(a.v.value)) + " : ")
			}
		}
		b.WriteString(held(""))
		for _, a := range as {
			if a.by.fill {
				b.WriteString(on(a) + " ? " + want(celtext.Quote(a.v.value)) + " : ")
			}
		}
		return "(" + b.String() + none + ")"
	}
	parts := []string{"(has(c.env) || !" + or(anyOn) + ` ? [] : [JSONPatch{op: "add", path: ` + env + `, value: []}])`}
	for _, n := range names {
		as := byName[n]
		var ons []string
		for _, a := range as {
			ons = append(ons, on(a))
		}
		idx := index(n)
		at := env + ` + "/" + string(` + idx + `)`
		held := "c.env[" + idx + "]"
		// value and valueFrom are one of: a merge's value takes the place of the container's
		// source, a default's yields to either (policies' mergeOneOf).
		parts = append(parts, "("+idx+" >= 0 && "+or(ons)+" ? "+value(as,
			func(string) string { return "has(" + held + ".value) || has(" + held + ".valueFrom) ? [] : " },
			func(v string) string {
				return `[JSONPatch{op: "add", path: ` + at + ` + "/value", value: ` + v + "}] + (has(" + held +
					`.valueFrom) ? [JSONPatch{op: "remove", path: ` + at + ` + "/valueFrom"}] : [])`
			}, "[]")+" : [])")
	}
	// Lacked: appended where the first selected entry of its name stands in application order.
	// Each name's place is one chain; the appends are sorted by it, so that the expression
	// grows with the entries, not with their square.
	var lacked []string
	for _, n := range names {
		as := byName[n]
		var b strings.Builder
		for _, a := range as {
			b.WriteString(on(a) + " ? " + strconv.Itoa(slices.Index(apps, a)) + " : ")
		}
		b.WriteString("-1")
		val := value(as, func(string) string { return "" }, func(v string) string { return v }, `""`)
		var ons []string
		for _, a := range as {
			ons = append(ons, on(a))
		}
		lacked = append(lacked, onlySelected(ons, `{"at": dyn(`+b.String()+`), "held": dyn(`+index(n)+` >= 0), "name": dyn(`+celtext.Quote(n)+`), "value": dyn(`+val+`)}`))
	}
	parts = append(parts, "["+strings.Join(lacked, ", ")+`].filter(x, int(x.at) >= 0 && !x.held).sortBy(x, int(x.at)).map(x, `+
		`JSONPatch{op: "add", path: `+env+` + "/-", value: {"name": x.name, "value": x.value}})`)
	return []piece{{expr: "object.spec.containers.transformList(ci, c, " + strings.Join(parts, " + ") + ").flatten()", by: by}}
}

// onlySelected is a list literal's element that is there only when one of its writers is
// selected (CEL's optional element): the API server builds no entry, and evaluates none of its
// chains, for policies that do not select the Pod, so that what a create costs grows with the
// policies that select it rather than with those of its group.
func onlySelected(writers []string, entry string) string {
	return "?(" + or(writers) + " ? optional.of(" + entry + ") : optional.none())"
}
