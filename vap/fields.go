package vap

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podpatch/podpatch/internal/celtext"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// The fields stage: what an enforce policy's part sets (Policy.Patch: {"metadata": …, "spec":
// …}, nulls kept), as one CEL validation per field the final object must hold, and the paths
// CEL does not check (reference §5, "The second line").

// check is one validation: its expression and the field it states, for the message.
type check struct {
	expression string
	requires   string // `spec.runtimeClassName == "gvisor"`
}

// walker collects the checks and the not-checked paths of one part.
type walker struct {
	checks     []check
	notChecked []string
	// mainManager is the only manager the policy can select, for "@main"; "" when several.
	mainManager profiles.Manager
	mainOK      bool
	// usesMain: a check reads the main container's name from a variable (mainName), computed
	// once per admission.
	usesMain bool
	// root is the object the checks read: "object", or "oldObject" for what the object held
	// before an update (a part's notHeldBefore).
	root string
	// typ is the Go type of the object the paths start from (dropsZero); paths into a
	// container start from the container.
	typ reflect.Type
	// alsoSet says which fields of a container entry (list, name) platform entries other than
	// that one also set ("*" entries included): a whole container holds exactly its policy's
	// value only in the others.
	alsoSet func(list, name string) map[string]bool
}

func (w *walker) skip(path, why string) { w.notChecked = append(w.notChecked, path+" ("+why+")") }

// stringMaps are the maps of free keys with string values: each entry its own check.
var stringMaps = map[string]bool{"labels": true, "annotations": true, "nodeSelector": true}

// part walks a Pod's or a Service's part.
func (w *walker) part(patch map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(patch)) {
		v := patch[k]
		switch k {
		case "metadata":
			meta, ok := v.(map[string]any)
			if !ok {
				w.skip("metadata", "not an object")
				continue
			}
			for _, mk := range slices.Sorted(maps.Keys(meta)) {
				if mk == "labels" || mk == "annotations" {
					w.stringMap(w.root+".metadata", []string{mk}, "metadata."+mk, meta[mk])
				} else {
					w.skip("metadata."+mk, "not a label or annotation")
				}
			}
		case "spec":
			spec, ok := v.(map[string]any)
			if !ok {
				w.skip("spec", "not an object")
				continue
			}
			w.spec(spec)
		default:
			w.skip(k, "unknown part")
		}
	}
}

// spec walks a pod spec or a Service spec.
func (w *walker) spec(spec map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		v := spec[k]
		path := "spec." + k
		switch k {
		case "tolerations":
			w.tolerations(v)
		case "containers", "initContainers":
			w.containers(k, v)
		default:
			w.value(w.root, []string{"spec", k}, path, v)
		}
	}
}

// value checks one member at root.path (display: shown) by its value's shape.
func (w *walker) value(root string, path []string, shown string, v any) {
	name := path[len(path)-1]
	if !fieldName(name) {
		w.skip(shown, "not a field CEL can select")
		return
	}
	switch x := v.(type) {
	case nil:
		w.skip(shown, "removal of a field the API server may default")
	case map[string]any:
		switch {
		case stringMaps[name]:
			w.stringMap(root, path, shown, v)
		case (name == "limits" || name == "requests") && len(path) >= 2 && path[len(path)-2] == "resources":
			w.quantities(root, path, shown, x)
		default:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				w.value(root, append(slices.Clip(path), k), shown+"."+k, x[k])
			}
		}
	case []any:
		strs, ok := stringList(x)
		if !ok || !atomicLists[name] {
			w.skip(shown, "a list")
			return
		}
		expr := present(root, path) + " && " + access(root, path) + " == " + celtext.Quotes(strs)
		if len(strs) == 0 {
			expr = absent(root, path) + " || size(" + access(root, path) + ") == 0"
		}
		w.checks = append(w.checks, check{expr, shown + " == " + celtext.Quotes(strs)})
	default:
		l, zero, ok := scalar(x)
		if !ok {
			w.skip(shown, "a number CEL compares inexactly")
			return
		}
		expr := present(root, path) + " && " + access(root, path) + " == " + l
		if zero && dropsZero(w.typ, path) {
			// The API server drops a zero value of an omitempty field: absent is that value.
			expr = absent(root, path) + " || " + access(root, path) + " == " + l
		}
		w.checks = append(w.checks, check{expr, shown + " == " + l})
	}
}

// atomicLists are the lists of strings the merge replaces whole (reference §3), which the
// object then holds as the policy has them.
var atomicLists = map[string]bool{"command": true, "args": true}

// stringList is a list of JSON strings.
func stringList(l []any) ([]string, bool) {
	out := make([]string, len(l))
	for i, v := range l {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// scalar is a JSON scalar as a CEL literal, and whether it is its type's zero value.
func scalar(v any) (lit string, zero, ok bool) {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x), x == "", true
	case bool:
		return strconv.FormatBool(x), !x, true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return "", false, false
		}
		return strconv.FormatInt(n, 10), n == 0, true
	}
	return "", false, false
}

// stringMap checks a labels, annotations or nodeSelector map: each key equal, or absent for null.
func (w *walker) stringMap(root string, path []string, shown string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		w.skip(shown, "removal of the whole map")
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		at := fmt.Sprintf("%s[%s]", shown, strconv.Quote(k))
		switch val := m[k].(type) {
		case nil:
			w.checks = append(w.checks, check{entryAbsent(root, path, k), at + " absent"})
		case string:
			w.checks = append(w.checks, check{entryIn(root, path, k, []string{val}), at + " == " + strconv.Quote(val)})
		default:
			w.skip(at, "not a string")
		}
	}
}

// quantities checks resource limits or requests by quantity: equal value, or absent for null.
func (w *walker) quantities(root string, path []string, shown string, m map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		at := fmt.Sprintf("%s[%s]", shown, strconv.Quote(k))
		var q string
		switch val := m[k].(type) {
		case nil:
			w.checks = append(w.checks, check{entryAbsent(root, path, k), at + " absent"})
			continue
		case string:
			q = val
		case json.Number:
			q = string(val)
		default:
			w.skip(at, "not a quantity")
			continue
		}
		parsed, err := resource.ParseQuantity(q)
		if err != nil {
			w.skip(at, "not a quantity")
			continue
		}
		expr := entryPresent(root, path, k) + " && quantity(" + access(root, path) + "[" + celtext.Quote(k) + "]).compareTo(quantity(" + celtext.Quote(parsed.String()) + ")) == 0"
		w.checks = append(w.checks, check{expr, at + " == " + parsed.String()})
	}
}

// tolerations checks that every toleration the policy brings is in the object (reference §3:
// the same key, operator (Equal when unset), value and effect; its tolerationSeconds, the
// policy's being the highest layer).
func (w *walker) tolerations(v any) {
	list, ok := v.([]any)
	if !ok {
		w.skip("spec.tolerations", "not a list")
		return
	}
	for i, it := range list {
		shown := fmt.Sprintf("spec.tolerations[%d]", i)
		t, ok := it.(map[string]any)
		if !ok {
			w.skip(shown, "not an object")
			continue
		}
		get := func(k, def string) (string, bool) {
			switch x := t[k].(type) {
			case nil:
				return def, true
			case string:
				return x, true
			}
			return "", false
		}
		key, ok1 := get("key", "")
		op, ok2 := get("operator", "Equal")
		val, ok3 := get("value", "")
		eff, ok4 := get("effect", "")
		if !ok1 || !ok2 || !ok3 || !ok4 {
			w.skip(shown, "not strings")
			continue
		}
		field := func(f, def string) string { return "(has(t." + f + ") ? t." + f + " : " + celtext.Quote(def) + ")" }
		cond := field("key", "") + " == " + celtext.Quote(key) + " && " + field("operator", "Equal") + " == " + celtext.Quote(op) +
			" && " + field("value", "") + " == " + celtext.Quote(val) + " && " + field("effect", "") + " == " + celtext.Quote(eff)
		shownVal := fmt.Sprintf("{key: %q, operator: %q, value: %q, effect: %q", key, op, val, eff)
		switch s := t["tolerationSeconds"].(type) {
		case nil:
		case json.Number:
			n, err := strconv.ParseInt(string(s), 10, 64)
			if err != nil {
				w.skip(shown+".tolerationSeconds", "not an integer")
				break
			}
			cond += " && has(t.tolerationSeconds) && t.tolerationSeconds == " + strconv.FormatInt(n, 10)
			shownVal += fmt.Sprintf(", tolerationSeconds: %d", n)
		default:
			w.skip(shown+".tolerationSeconds", "not an integer")
		}
		expr := "has(" + w.root + ".spec.tolerations) && " + w.root + ".spec.tolerations.exists(t, " + cond + ")"
		w.checks = append(w.checks, check{expr, "spec.tolerations holds " + shownVal + "}"})
	}
}

// containers checks the entries of a containers or initContainers list: "*" in every container
// of the list, a name in the container of that name (and its presence, for a whole container,
// which the merge appends), "@main" in the manager's main container (reference §3).
func (w *walker) containers(list string, v any) {
	entries, ok := v.([]any)
	if !ok {
		w.skip("spec."+list, "not a list")
		return
	}
	l := w.root + ".spec." + list
	for i, it := range entries {
		c, ok := it.(map[string]any)
		name, _ := c["name"].(string)
		if !ok || name == "" {
			w.skip(fmt.Sprintf("spec.%s[%d]", list, i), "an entry without a name")
			continue
		}
		shown := fmt.Sprintf("spec.%s[%s]", list, name)
		var guard string // the containers a field is checked in, for all(c, guard || check)
		switch {
		case name == "*":
			guard = ""
		case name == "@main":
			if list != "containers" || !w.mainOK {
				w.skip(shown, "the main container of a policy selecting several managers")
				continue
			}
			guard, w.usesMain = "c.name != variables."+mainVariable(w.root), true
		default:
			guard = "c.name != " + celtext.Quote(name)
			if _, whole := c["image"]; whole {
				w.checks = append(w.checks, check{"has(" + l + ") && " + l + ".exists(c, c.name == " + celtext.Quote(name) + ")", shown + " present"})
			}
		}
		// The "*" entry of containers reaches the ephemeral containers `kubectl debug` adds too,
		// with the fields an ephemeral container may have (policies.EphemeralFields).
		ephemeral := list == "containers" && name == "*"
		eph := w.root + ".spec.ephemeralContainers"
		for _, k := range slices.Sorted(maps.Keys(c)) {
			sub := &walker{typ: containerType}
			switch k {
			case "name":
				continue
			case "env":
				sub.env(shown, c[k])
			case "volumeMounts":
				sub.volumeMounts(shown, c[k])
			default:
				sub.value("c", []string{k}, shown+"."+k, c[k])
			}
			w.notChecked = append(w.notChecked, sub.notChecked...)
			for _, ch := range sub.checks {
				body := ch.expression
				if guard != "" {
					body = guard + " || (" + body + ")"
				}
				w.checks = append(w.checks, check{"!has(" + l + ") || " + l + ".all(c, " + body + ")", ch.requires})
			}
			if ephemeral && slices.Contains(policies.EphemeralFields, k) {
				for _, ch := range sub.checks {
					w.checks = append(w.checks, check{"!has(" + eph + ") || " + eph + ".all(c, " + ch.expression + ")",
						"spec.ephemeralContainers[*]" + strings.TrimPrefix(ch.requires, shown)})
				}
			}
		}
		if _, whole := c["image"]; whole && name != "*" && name != "@main" && !isMainName(name) {
			w.whole(list, name, shown, c, guard)
		}
	}
}

// creatorFields are the fields of a whole platform container none of the creator's values
// survive in (reference §3: its command, args, env, mounts, securityContext, …) and the API
// server does not default: the stored container has them as its policy has them, or not at
// all. defaultedFields are those it defaults, where a value the creator gave cannot be told
// from the default.
var (
	creatorFields = []string{"args", "command", "env", "envFrom", "lifecycle", "livenessProbe", "ports", "readinessProbe",
		"restartPolicy", "securityContext", "startupProbe", "stdin", "stdinOnce", "tty", "volumeDevices", "volumeMounts", "workingDir"}
	defaultedFields = []string{"imagePullPolicy", "resizePolicy", "resources", "terminationMessagePath", "terminationMessagePolicy"}
)

// whole checks that a whole platform container (name, with an image) keeps none of the
// creator's fields: each creator field the policy leaves unset is absent, its env names and
// its mounts are the policy's alone; unless another platform entry reaching the container
// sets that field too, when only the policy's own values are checked (above).
func (w *walker) whole(list, name, shown string, c map[string]any, guard string) {
	others := map[string]bool{}
	if w.alsoSet != nil {
		others = w.alsoSet(list, name)
	}
	l := w.root + ".spec." + list
	in := func(body string) string {
		return "!has(" + l + ") || " + l + ".all(c, " + guard + " || (" + body + "))"
	}
	var shared []string
	for _, f := range creatorFields {
		if others[f] {
			shared = append(shared, f)
			continue
		}
		v, set := c[f]
		switch {
		case !set:
			w.checks = append(w.checks, check{in("!has(c." + f + ")"), shown + "." + f + " absent"})
		case f == "env":
			var names []string
			if list, ok := v.([]any); ok {
				for _, it := range list {
					if e, ok := it.(map[string]any); ok {
						if n, ok := e["name"].(string); ok {
							names = append(names, n)
						}
					}
				}
			}
			w.checks = append(w.checks, check{in("!has(c.env) || c.env.all(e, e.name in " + celtext.Quotes(names) + ")"),
				shown + ".env names in " + celtext.Quotes(names)})
		case f == "volumeMounts":
			n := 0
			if list, ok := v.([]any); ok {
				n = len(list)
			}
			// Each of the policy's mounts is checked above, and mountPaths are unique.
			w.checks = append(w.checks, check{in("(has(c.volumeMounts) ? size(c.volumeMounts) : 0) == " + strconv.Itoa(n)),
				shown + ".volumeMounts the policy's alone"})
		}
	}
	var defaulted []string
	for _, f := range defaultedFields {
		if _, set := c[f]; !set {
			defaulted = append(defaulted, f)
		}
	}
	if len(defaulted) > 0 {
		w.skip(shown+"."+strings.Join(defaulted, ", ."), "the creator's value, which the API server's default hides")
	}
	if len(shared) > 0 {
		w.skip(shown+"."+strings.Join(shared, ", ."), "also set by another platform entry: only the policy's own values are checked")
	}
}

// isMainName reports whether name is a manager's conventional main container, which a platform
// entry with an image never replaces (reference §3): it sets the image only.
func isMainName(name string) bool {
	for _, pr := range profiles.All() {
		if slices.Contains(pr.MainContainers, name) {
			return true
		}
	}
	return false
}

// volumeMounts checks that each of the policy's mounts is in the container, by its mountPath,
// with the fields the policy gives it.
func (w *walker) volumeMounts(shown string, v any) {
	list, ok := v.([]any)
	if !ok {
		w.skip(shown+".volumeMounts", "not a list")
		return
	}
	for i, it := range list {
		m, ok := it.(map[string]any)
		path, _ := m["mountPath"].(string)
		if !ok || path == "" {
			w.skip(fmt.Sprintf("%s.volumeMounts[%d]", shown, i), "an entry without a mountPath")
			continue
		}
		at := fmt.Sprintf("%s.volumeMounts[%s]", shown, strconv.Quote(path))
		sub := &walker{typ: volumeMountType}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			sub.value("m", []string{k}, at+"."+k, m[k])
		}
		if len(sub.notChecked) > 0 {
			w.skip(at, "a field CEL does not compare")
			continue
		}
		var conj []string
		for _, ch := range sub.checks {
			conj = append(conj, "("+ch.expression+")")
		}
		w.checks = append(w.checks, check{"has(c.volumeMounts) && c.volumeMounts.exists(m, " + strings.Join(conj, " && ") + ")", at + " present"})
	}
}

// env checks a container's env entries with a literal value: one of that name and value.
func (w *walker) env(shown string, v any) {
	list, ok := v.([]any)
	if !ok {
		w.skip(shown+".env", "not a list")
		return
	}
	for i, it := range list {
		e, ok := it.(map[string]any)
		name, _ := e["name"].(string)
		if !ok || name == "" {
			w.skip(fmt.Sprintf("%s.env[%d]", shown, i), "an entry without a name")
			continue
		}
		at := fmt.Sprintf("%s.env[%s]", shown, name)
		val, isString := e["value"].(string)
		if len(e) != 2 || !isString {
			w.skip(at, "not a name and a value")
			continue
		}
		valueIs := "has(e.value) && e.value == " + celtext.Quote(val)
		if val == "" {
			valueIs = "!has(e.value) || e.value == \"\""
		}
		// Every definition of the name: the kubelet uses the last, a reader may use the first.
		w.checks = append(w.checks, check{"has(c.env) && c.env.exists(e, e.name == " + celtext.Quote(name) + ") && c.env.all(e, e.name != " + celtext.Quote(name) + " || (" + valueIs + "))",
			at + ".value == " + strconv.Quote(val) + " in every definition"})
	}
}

// mainName is the name of the manager's main container in root's object (policies' mainContainer):
// the first container with one of the manager's conventional names, else the first. It is the
// policy's variable mainName, evaluated once, so that a check over every container stays linear.
func mainName(m profiles.Manager, root string) string {
	pr, _ := profiles.Of(m)
	first := root + ".spec.containers[0].name"
	if len(pr.MainContainers) == 0 {
		return first
	}
	names := celtext.Quotes(pr.MainContainers)
	return "(" + root + ".spec.containers.exists(x, x.name in " + names + ") ? " + root + ".spec.containers.filter(x, x.name in " + names + ")[0].name : " + first + ")"
}

// mainVariable names the variable holding the main container's name in root's object.
func mainVariable(root string) string {
	if root == "object" {
		return "mainName"
	}
	return "oldMainName"
}

// requires renders a check's message.
func requires(ref string, ch check) string {
	return "podpatch enforce policy " + ref + " requires " + ch.requires
}

// clip bounds a message: an annotation value or a long literal is cut with a marker.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
