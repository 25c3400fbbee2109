// Package allowlist holds what namespace policies may reach (reference §3, "Scope"): the fields
// they may set (Fields, --namespace-allowed-fields) and the infrastructure annotations they may
// not set or remove (DeniedAnnotations, --namespace-denied-annotations), compiled from the
// flags, and the checks of a namespace policy's part against them (Check), which the engine's
// parse stage runs on every namespace policy.
package allowlist

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultFields is what namespace policies may set unless the platform says
// otherwise (reference §3). Entries are paths inside the patched object; `[*]` stands for every item
// of a list; a `service.` prefix makes an entry apply to Service patches instead of pod templates.
var DefaultFields = []string{
	"metadata.labels",
	"metadata.annotations",
	"spec.nodeSelector",
	"spec.tolerations",
	"spec.affinity",
	"spec.topologySpreadConstraints",
	"spec.priorityClassName",
	"spec.containers[*].resources",
	"spec.containers[*].env",
	"service.metadata.labels",
	"service.metadata.annotations",
}

// Fields is the compiled form of the fields namespace policies may set.
type Fields struct {
	template [][]string
	service  [][]string
	entries  []string
}

// ParseFields compiles entries such as "spec.containers[*].resources" or
// "service.metadata.annotations".
func ParseFields(entries []string) (Fields, error) {
	var a Fields
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		target := &a.template
		rest := strings.TrimPrefix(e, "template.")
		if s, ok := strings.CutPrefix(e, "service."); ok {
			target, rest = &a.service, s
		}
		segs, err := splitAllowedPath(rest)
		if err != nil {
			return Fields{}, fmt.Errorf("allowed field %q: %w", e, err)
		}
		*target = append(*target, segs)
		a.entries = append(a.entries, e)
	}
	sort.Strings(a.entries)
	return a, nil
}

// String lists the entries, as the flag takes them.
func (a Fields) String() string { return strings.Join(a.entries, ",") }

func splitAllowedPath(p string) ([]string, error) {
	var segs []string
	for _, part := range strings.Split(p, ".") {
		name, list := strings.CutSuffix(part, "[*]")
		if name == "" || strings.ContainsAny(name, "[]*") {
			return nil, fmt.Errorf("want dot-separated field names, with [*] after a list field")
		}
		segs = append(segs, name)
		if list {
			segs = append(segs, "[*]")
		}
	}
	if segs[0] != "metadata" && segs[0] != "spec" {
		return nil, fmt.Errorf("must start with metadata or spec")
	}
	return segs, nil
}

// secretPaths reach Secrets. They are outside the allow-list even under an allowed parent
// (spec.containers[*].env): someone who may edit only ConfigMaps in a namespace must not expose
// its Secrets to user code. An entry that names one (or a path inside it) allows it.
var secretPaths = [][]string{
	{"spec", "containers", "[*]", "env", "[*]", "valueFrom", "secretKeyRef"},
	{"spec", "containers", "[*]", "envFrom", "[*]", "secretRef"},
	{"spec", "initContainers", "[*]", "env", "[*]", "valueFrom", "secretKeyRef"},
	{"spec", "initContainers", "[*]", "envFrom", "[*]", "secretRef"},
	{"spec", "volumes", "[*]", "secret"},
	{"spec", "volumes", "[*]", "projected", "sources", "[*]", "secret"},
}

// Check reports every effect of a namespace policy's part (its template, or its service with
// service set) outside the allowed entries: every path it sets, replaces or removes must lie
// inside one (reference §3). A null or a list replaced whole on the way to an allowed path
// reaches what is not allowed, so it is refused; keyed says which lists a patch merges item by
// item (the engine's merge rules), any other list replacing the object's whole. A list item's
// merge key (`name`) is allowed wherever a path runs through the list; Secret references need
// an entry of their own.
func (a Fields) Check(raw map[string]any, service bool, keyed func(list string) bool, fld *field.Path) field.ErrorList {
	allowed := a.template
	if service {
		allowed = a.service
	}
	var errs field.ErrorList
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = strings.ReplaceAll(strings.Join(a, "."), ".[*]", "[*]")
	}
	all := strings.Join(names, ", ")
	if all == "" {
		all = "nothing"
	}
	forbid := func(fld *field.Path, why string) {
		errs = append(errs, field.Forbidden(fld, why+"namespace policies may set only: "+all))
	}
	var walk func(v any, segs []string, covered bool, fld *field.Path)
	walk = func(v any, segs []string, covered bool, fld *field.Path) {
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				next := append(segs[:len(segs):len(segs)], k)
				inside := covered || coveredBy(next, allowed)
				if secret := secretPathAt(next); secret != nil && !namesPath(secret, allowed) {
					forbid(fld.Child(k), "a Secret reference, allowed only when the platform names it; ")
					continue
				}
				switch {
				case inside && t[k] == nil:
				case inside:
					walk(t[k], next, true, fld.Child(k))
				case k == "name" && len(segs) > 0 && segs[len(segs)-1] == "[*]" && t[k] != nil:
				case !leadsTo(next, allowed):
					forbid(fld.Child(k), "")
				case t[k] == nil:
					forbid(fld.Child(k), "null removes fields outside the allowed ones; ")
				default:
					if _, isList := t[k].([]any); isList && !keyed(k) {
						forbid(fld.Child(k), "this list replaces the object's whole, fields outside the allowed ones included; ")
						continue
					}
					walk(t[k], next, false, fld.Child(k))
				}
			}
		case []any:
			next := append(segs[:len(segs):len(segs)], "[*]")
			for i, item := range t {
				walk(item, next, covered, fld.Index(i))
			}
		}
	}
	walk(raw, nil, false, fld)
	return errs
}

// secretPathAt returns the Secret path p is, if any.
func secretPathAt(p []string) []string {
	for _, s := range secretPaths {
		if len(s) == len(p) && equalSegs(s, p) {
			return s
		}
	}
	return nil
}

// namesPath reports whether an allowed entry is p or lies inside it.
func namesPath(p []string, allowed [][]string) bool {
	for _, a := range allowed {
		if len(a) >= len(p) && equalSegs(p, a[:len(p)]) {
			return true
		}
	}
	return false
}

// coveredBy reports whether some allowed path is a prefix of p.
func coveredBy(p []string, allowed [][]string) bool {
	for _, a := range allowed {
		if len(a) <= len(p) && equalSegs(a, p[:len(a)]) {
			return true
		}
	}
	return false
}

// leadsTo reports whether p is a strict prefix of some allowed path.
func leadsTo(p []string, allowed [][]string) bool {
	for _, a := range allowed {
		if len(p) < len(a) && equalSegs(p, a[:len(p)]) {
			return true
		}
	}
	return false
}

func equalSegs(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// DefaultDeniedAnnotations are the annotation keys namespace policies may not set or
// remove unless the platform says otherwise (reference §3, "Infrastructure annotations"): keys that
// make cloud or cluster infrastructure act — load balancers, DNS, secret injectors — and
// podpatch's own. Entries are shell globs on the whole key; an entry starting with `!` is an
// exception to the others.
var DefaultDeniedAnnotations = []string{
	"service.beta.kubernetes.io/*",
	"service.kubernetes.io/*",
	"networking.gke.io/*",
	"cloud.google.com/*",
	"external-dns.alpha.kubernetes.io/*",
	"vault.hashicorp.com/*",
	"*.podpatch.io/*",
	"podpatch.io/*",
	"!podpatch.io/provide-external-url", // a Service's request of its external URL (reference §6)
}

// DeniedAnnotations is the compiled form of the annotation keys namespace policies may not set
// or remove. Its zero value is the default list (DefaultDeniedAnnotations), so that
// policies.Options built without it keep infrastructure out of namespace policies' reach; an empty list
// from ParseDeniedAnnotations denies nothing.
type DeniedAnnotations struct {
	parsed       bool
	deny, except []string
	entries      []string
}

// ParseDeniedAnnotations compiles entries such as "service.beta.kubernetes.io/*" (a glob on the
// key, as path.Match reads it) or "!podpatch.io/provide-external-url" (an exception).
func ParseDeniedAnnotations(entries []string) (DeniedAnnotations, error) {
	d := DeniedAnnotations{parsed: true}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		g, except := strings.CutPrefix(e, "!")
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return DeniedAnnotations{}, fmt.Errorf("denied annotation %q: not a valid shell glob", e)
		}
		if except {
			d.except = append(d.except, g)
		} else {
			d.deny = append(d.deny, g)
		}
		d.entries = append(d.entries, e)
	}
	return d, nil
}

// defaultDenied is DefaultDeniedAnnotations compiled, for the zero DeniedAnnotations.
var defaultDenied = func() DeniedAnnotations {
	d, err := ParseDeniedAnnotations(DefaultDeniedAnnotations)
	if err != nil {
		panic(err) // the built-in list is a constant; a failure is a programming error
	}
	return d
}()

func (d DeniedAnnotations) compiled() DeniedAnnotations {
	if !d.parsed {
		return defaultDenied
	}
	return d
}

// String lists the entries, as the flag takes them.
func (d DeniedAnnotations) String() string { return strings.Join(d.compiled().entries, ",") }

// Denies returns the entry that denies key, if any: the first deny glob the key matches, unless
// an exception matches it too.
func (d DeniedAnnotations) Denies(key string) (string, bool) {
	d = d.compiled()
	for _, g := range d.except {
		if ok, _ := path.Match(g, key); ok {
			return "", false
		}
	}
	for _, g := range d.deny {
		if ok, _ := path.Match(g, key); ok {
			return g, true
		}
	}
	return "", false
}

// empty reports whether nothing is denied.
func (d DeniedAnnotations) empty() bool { return len(d.compiled().deny) == 0 }

// Check reports every annotation of a namespace policy's part (a template or service patch, as
// written) that the denied list covers: setting it, at any layer, or removing it with null
// (reference §3, "Infrastructure annotations"). A null on the way there — `metadata: null`,
// `annotations: null` — removes every annotation, the denied ones included.
func (d DeniedAnnotations) Check(raw map[string]any, fld *field.Path) field.ErrorList {
	if d.empty() {
		return nil
	}
	const flag = "--namespace-denied-annotations"
	metaV, present := raw["metadata"]
	if present && metaV == nil {
		return field.ErrorList{field.Forbidden(fld.Child("metadata"),
			"null removes every annotation, the infrastructure annotations of "+flag+" included; namespace policies may not remove those")}
	}
	meta, _ := metaV.(map[string]any)
	annV, present := meta["annotations"]
	if present && annV == nil {
		return field.ErrorList{field.Forbidden(fld.Child("metadata", "annotations"),
			"null removes every annotation, the infrastructure annotations of "+flag+" included; namespace policies may not remove those")}
	}
	ann, _ := annV.(map[string]any)
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		if g, denied := d.Denies(k); denied {
			verb := "set"
			if ann[k] == nil {
				verb = "remove"
			}
			errs = append(errs, field.Forbidden(fld.Child("metadata", "annotations").Key(k), fmt.Sprintf(
				"namespace policies may not %s this annotation: it makes infrastructure act (cloud load balancers, DNS, secret injectors, podpatch itself); it matches %q of %s",
				verb, g, flag)))
		}
	}
	return errs
}
