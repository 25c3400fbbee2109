package policies

import (
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
)

// What it means for a stored object to hold an enforce policy (reference §5, "Enforce on
// updates"): one predicate, for the updates (PatchUpdate), the audit and explain (Set.Holding).
//
// An object holds an enforce policy when every field the policy sets has, in the object, the
// value and the effect the policy means. It is judged by applying the policy to the object
// again and comparing the result with the object (sameAsStored), where a difference does not
// count when it is not one of effect:
//
//   - a field the API server defaulted inside an element the policy brings whole (a platform
//     sidecar, a volume's projected sources) and that still carries the API server's default
//     (apiServerDefaults): the policy's element, stored, carries it; a field the creator wrote
//     into such an element (a `command` on the platform's sidecar) is not a default and counts;
//   - an env definition another of the same name follows in the same container: the kubelet
//     uses the last, and only the last counts (lastWins).
//
// And a difference the re-application cannot see counts: a Pod-level security field the policy
// sets that a container's own securityContext overrides with another value (podOverridable)
// does not have the policy's effect in that container.

// NotHeld is an enforce policy that selects an object as stored and that the object does not
// hold, with the first field where it does not (a path, never a value: env can hold secrets).
type NotHeld struct {
	Policy *Policy
	// Field is where the object first differs from what the policy means, and Why says how.
	Field, Why string
	// Overridden: the policy's fields are all there, and only a container's own security
	// field takes their effect (podOverridable). Ephemeral: only an ephemeral container lacks
	// what the policy brings it (ephemeralPatch). Either way applying the policy to an update
	// of the object changes nothing it may not.
	Overridden, Ephemeral bool
}

// String is the field and how it differs, for warnings and reports.
func (n NotHeld) String() string { return n.Field + ": " + n.Why }

// podOverridable are the Pod-level securityContext fields a container's own securityContext
// overrides (k8s.io/api core/v1 PodSecurityContext: "the value specified in SecurityContext
// takes precedence").
var podOverridable = []string{"runAsUser", "runAsGroup", "runAsNonRoot", "seLinuxOptions", "seccompProfile", "appArmorProfile", "windowsOptions"}

// lastWins are the keyed lists whose items of one key the kubelet reads as one definition, the
// last: env (kubelet's makeEnvironmentVariables builds a map in list order). The other keyed
// lists the API server lets carry duplicates (ports, imagePullSecrets, hostAliases, tolerations,
// readinessGates) use every item.
var lastWins = map[string]bool{"env": true}

// SameAsStored compares an object as stored with what was written (an object after an enforce
// policy was applied to it again, or an element as sent to the API server), and returns the
// first field where they differ in effect ("" when none) and how: a member the stored object
// has and the written one lacks counts only when it is not the API server's default there
// (apiServerDefaults). Both are whole JSON documents; the comparison is linear in their size.
// test/e2e's TestDefaultsTable holds the table to what a real API server stores.
func SameAsStored(stored, written []byte) (field, why string, err error) {
	return sameAsStored(stored, written)
}

func sameAsStored(stored, patched []byte) (field, why string, err error) {
	s, err := decodeNumbers(stored)
	if err != nil {
		return "", "", err
	}
	p, err := decodeNumbers(patched)
	if err != nil {
		return "", "", err
	}
	c := comparison{}
	if !c.same(s, p) {
		return c.field, c.why, nil
	}
	return "", "", nil
}

// decodeNumbers decodes a whole JSON document as the merge reads it (jsontree: numbers as
// json.Number, a duplicated member's last value).
func decodeNumbers(b []byte) (any, error) {
	if !json.Valid(b) {
		return nil, errors.New("decode: not valid JSON")
	}
	return jsontree.ExpandAll(json.RawMessage(b)), nil
}

// comparison walks a stored object and its re-applied copy side by side.
type comparison struct {
	// at is the path walked: a member's name, or "[]" for a list item (its display name in
	// items).
	at    []string
	items []string
	// parents are the stored objects along the path, for the defaults that depend on their
	// element (imagePullPolicy on the image, a request on the limit).
	parents []map[string]any
	field   string
	why     string
}

func (c *comparison) fail(why string) bool {
	var b strings.Builder
	for i, seg := range c.at {
		switch {
		case seg == "[]":
			b.WriteString("[" + c.items[i] + "]")
		case b.Len() > 0:
			b.WriteString("." + seg)
		default:
			b.WriteString(seg)
		}
	}
	c.field, c.why = b.String(), why
	return false
}

func (c *comparison) push(seg, item string) {
	c.at, c.items = append(c.at, seg), append(c.items, item)
}

func (c *comparison) pop() { c.at, c.items = c.at[:len(c.at)-1], c.items[:len(c.items)-1] }

// same compares a stored value with its re-applied one.
func (c *comparison) same(s, p any) bool {
	switch sv := s.(type) {
	case map[string]any:
		pv, ok := p.(map[string]any)
		if !ok {
			return c.fail("differs from what the policy sets")
		}
		c.parents = append(c.parents, sv)
		defer func() { c.parents = c.parents[:len(c.parents)-1] }()
		for k, x := range sv {
			c.push(k, "")
			y, present := pv[k]
			var ok bool
			if present {
				ok = c.same(x, y)
			} else {
				ok = c.defaulted(x)
			}
			c.pop()
			if !ok {
				return false
			}
		}
		for k := range pv {
			if _, present := sv[k]; !present {
				c.push(k, "")
				return c.fail("the policy sets it, the object lacks it")
			}
		}
		return true
	case []any:
		pv, ok := p.([]any)
		if !ok || len(pv) != len(sv) {
			return c.fail("differs from what the policy sets")
		}
		field := ""
		if n := len(c.at); n > 0 {
			field = c.at[n-1]
		}
		var last map[string]int // the last position of each name, for lastWins lists
		if lastWins[field] {
			last = make(map[string]int, len(sv))
			for i, x := range sv {
				if name, ok := nameOf(x); ok {
					last[name] = i
				}
			}
		}
		for i, x := range sv {
			name, named := nameOf(x)
			if last != nil && named && last[name] != i {
				continue // a definition a later one of the same name overrides
			}
			if !named {
				name = strconv.Itoa(i)
			}
			c.push("[]", name)
			ok := c.same(x, pv[i])
			c.pop()
			if !ok {
				return false
			}
		}
		return true
	default:
		if !sameScalar(s, p, c.quantity()) {
			return c.fail("differs from what the policy sets")
		}
		return true
	}
}

// nameOf is a list item's name, when it has one.
func nameOf(x any) (string, bool) {
	m, ok := x.(map[string]any)
	if !ok {
		return "", false
	}
	name, ok := m["name"].(string)
	return name, ok
}

// quantity reports whether the path walked is a resource quantity (stored canonicalised: the
// policy's 1000m is stored as 1): a member of a resource list, an emptyDir's sizeLimit, a
// resourceFieldRef's divisor.
func (c *comparison) quantity() bool {
	n := len(c.at)
	if n == 0 {
		return false
	}
	switch c.at[n-1] {
	case "sizeLimit", "divisor":
		return true
	}
	if n < 2 {
		return false
	}
	switch c.at[n-2] {
	case "limits", "requests", "overhead":
		return true
	}
	return false
}

// sameScalar compares two JSON scalars: numbers by value, quantities by value.
func sameScalar(s, p any, quantity bool) bool {
	switch sv := s.(type) {
	case json.Number:
		pv, ok := p.(json.Number)
		if !ok {
			return false
		}
		if sv == pv {
			return true
		}
		a, _, errA := big.ParseFloat(string(sv), 10, 128, big.ToNearestEven)
		b, _, errB := big.ParseFloat(string(pv), 10, 128, big.ToNearestEven)
		return errA == nil && errB == nil && a.Cmp(b) == 0
	case string:
		pv, ok := p.(string)
		if !ok {
			return false
		}
		if sv == pv {
			return true
		}
		if !quantity {
			return false
		}
		a, errA := resource.ParseQuantity(sv)
		b, errB := resource.ParseQuantity(pv)
		return errA == nil && errB == nil && a.Cmp(b) == 0
	default:
		return s == p // bool or nil
	}
}

// defaulted reports whether a stored member the re-applied object lacks is the API server's
// default there (apiServerDefaults): an object member every one of whose members is, or a
// scalar with the default's value.
func (c *comparison) defaulted(x any) bool {
	d, ok := defaultAt(c.at)
	if !ok {
		return c.fail("the object has it, the policy does not set it")
	}
	if d.object {
		m, ok := x.(map[string]any)
		if !ok {
			return c.fail("the object has it, the policy does not set it")
		}
		return c.same(m, map[string]any{}) // each member must be a default in turn
	}
	var parent map[string]any
	if n := len(c.parents); n > 0 {
		parent = c.parents[n-1]
	}
	want, has := d.value(c, parent)
	if !has || !sameScalar(x, want, c.quantity()) {
		return c.fail("the object has it, the policy does not set it, and it is not the API server's default")
	}
	return true
}

// defaultAt finds the table's entry for a path walked.
func defaultAt(at []string) (apiServerDefault, bool) {
	key := strings.Join(at, ".")
	if d, ok := apiServerDefaults[key]; ok {
		return d, true
	}
	// The keys of a map of resources: requests.<any resource>.
	if n := len(at); n >= 2 {
		if d, ok := apiServerDefaults[strings.Join(at[:n-1], ".")+".*"]; ok {
			return d, true
		}
	}
	return apiServerDefault{}, false
}

// Holding is what an object as stored holds of the platform's enforce policies that select it
// (Set.Holding).
type Holding struct {
	// Recognised is false for an object no profile recognises: nothing selects it.
	Recognised bool
	Identity   profiles.Identity
	// Selected are the enforce policies that select the object, in layer order.
	Selected []*Policy
	// NotHeld are those of Selected that the object does not hold.
	NotHeld []NotHeld
	// outOfTime: the request's budget ran out before it was known (result says so).
	outOfTime bool
	result    Result
}

// Holds reports whether the object holds an enforce policy that selects it.
func (h *Holding) Holds(p *Policy) bool {
	return slices.Contains(h.Selected, p) && !slices.ContainsFunc(h.NotHeld, func(n NotHeld) bool { return n.Policy == p })
}

// reapplies reports whether applying the policy to the object again changes nothing but
// defaults: it holds, or only a container's own security field takes its effect.
func (h *Holding) reapplies(p *Policy) bool {
	return slices.Contains(h.Selected, p) && !slices.ContainsFunc(h.NotHeld, func(n NotHeld) bool { return n.Policy == p && !n.Overridden && !n.Ephemeral })
}

// Holding judges an object as stored against the platform's enforce policies that select it
// (the predicate of holds.go): the updates' check (PatchUpdate), the audit's and explain's.
func (s *Set) Holding(in Input) (Holding, error) {
	in.Explain = false
	return s.holding(in)
}

// updating is the mode of an update's evaluation, and of a re-application judging what an
// object holds: its enforce policies alone, those of keep (nil: every one), the ephemeral
// containers named alone when set.
func updating(patchOnly bool, keep func(*Policy) bool, ephemeral []string) mode {
	return mode{patchOnly: patchOnly, update: true, keep: keep, ephemeral: ephemeral}
}

func (s *Set) holding(in Input) (Holding, error) {
	// Most objects hold what they were admitted with to the byte: the re-application's
	// JSONPatch is empty, and nothing needs comparing.
	all, err := s.apply(in, updating(true, nil, nil))
	if err != nil || !all.Recognised {
		return Holding{result: all}, err
	}
	same := !all.Denied && !hasOps(all.Patch)
	if !same && !all.Denied {
		if all, err = s.apply(in, updating(false, nil, nil)); err != nil {
			return Holding{result: all}, err
		}
	}
	h := Holding{Recognised: true, Identity: all.Identity, Selected: enforceOf(all), result: all}
	if all.Denied && enforceOutOfTime(all.Skipped) {
		h.outOfTime = true
		return h, nil
	}
	if len(h.Selected) == 0 {
		return h, nil
	}
	// Decoded lazily, only as far as what containers override and ephemeral ones needs.
	var stored *podView
	if in.Kind == profiles.KindPod && slices.ContainsFunc(h.Selected, readsContainers) {
		stored = viewPod(in.Object)
	}
	judged := same
	if !same && !all.Denied {
		field, _, err := sameAsStored(in.Object, all.Object)
		if err != nil {
			return h, err
		}
		judged = field == "" // all held together; else each is judged alone
	}
	for _, p := range h.Selected {
		if !judged {
			alone := func(q *Policy) bool { return q == p }
			r, err := s.apply(in, updating(true, alone, nil))
			if err == nil && !r.Denied && slices.Contains(r.Applied, p) && hasOps(r.Patch) {
				r, err = s.apply(in, updating(false, alone, nil)) // to compare: the object as re-applied
			}
			if err != nil {
				return h, err
			}
			if r.Denied && enforceOutOfTime(r.Skipped) {
				h.outOfTime, h.result = true, r
				return h, nil
			}
			if r.Denied || !slices.Contains(r.Applied, p) {
				h.NotHeld = append(h.NotHeld, NotHeld{Policy: p, Field: "(the policy)", Why: "cannot be applied to the object as stored"})
				continue
			}
			if hasOps(r.Patch) {
				field, why, err := sameAsStored(in.Object, r.Object)
				if err != nil {
					return h, err
				}
				if field != "" {
					h.NotHeld = append(h.NotHeld, NotHeld{Policy: p, Field: field, Why: why})
					continue
				}
			}
		}
		if n, ok := overriddenIn(stored, p, nil); ok {
			h.NotHeld = append(h.NotHeld, n)
			continue
		}
		n, ok, err := s.ephemeralHeld(in, stored, p)
		if err != nil {
			return h, err
		}
		if ok {
			h.NotHeld = append(h.NotHeld, n)
		}
	}
	return h, nil
}

// readsContainers reports whether judging a policy reads the Pod's containers beyond the
// re-application: it sets a Pod-level field a container overrides, or brings ephemeral
// containers fields.
func readsContainers(p *Policy) bool {
	patch := p.Patch(profiles.KindPod)
	spec, _ := patch["spec"].(map[string]any)
	psc, _ := spec["securityContext"].(map[string]any)
	for _, f := range podOverridable {
		if psc[f] != nil {
			return true
		}
	}
	return ephemeralPatch(patch, []string{""}) != nil
}

// ephemeralHeld judges the ephemeral containers of a Pod as stored against what an enforce
// policy brings them (ephemeralPatch: its "*" entry's EphemeralFields): a container added by
// `kubectl debug` while podpatch was not asked holds it only with those. ok with a NotHeld
// when one does not.
func (s *Set) ephemeralHeld(in Input, pod *podView, p *Policy) (NotHeld, bool, error) {
	if pod == nil || ephemeralPatch(p.Patch(profiles.KindPod), []string{""}) == nil {
		return NotHeld{}, false, nil
	}
	var names []string
	pod.containers("ephemeralContainers", func(name string, c, _ map[string]any) bool {
		if _, named := nameOf(c); named {
			names = append(names, name)
		}
		return true
	})
	if len(names) == 0 {
		return NotHeld{}, false, nil
	}
	r, err := s.apply(in, updating(false, func(q *Policy) bool { return q == p }, names))
	if err != nil {
		return NotHeld{}, false, err
	}
	if r.Denied || !slices.Contains(r.Applied, p) {
		// What the policy brings them cannot be applied to them (privileged, where it sets
		// allowPrivilegeEscalation: false): they do not hold it.
		n := NotHeld{Policy: p, Field: "spec.ephemeralContainers", Why: "what the policy brings them cannot be applied to them", Ephemeral: true}
		for _, sk := range r.Skipped {
			if sk.Policy == p && sk.Violation.Field != "" {
				n.Field, n.Why = sk.Violation.Field, "the policy cannot be applied: "+sk.Violation.Message
				break
			}
		}
		return n, true, nil
	}
	field, why, err := sameAsStored(in.Object, r.Object)
	if err != nil || field == "" {
		return NotHeld{}, false, err
	}
	return NotHeld{Policy: p, Field: field, Why: why, Ephemeral: true}, true, nil
}

// podView is a Pod decoded lazily (jsontree), for what containers override.
type podView struct {
	t    *jsontree.Tree
	spec map[string]any
}

func viewPod(raw []byte) *podView {
	t := jsontree.New()
	obj, _ := t.Decode(json.RawMessage(raw)).(map[string]any)
	spec, _ := t.GetMap(obj, "spec")
	return &podView{t: t, spec: spec}
}

// containers calls f with each container of a list, its name (else its position) and its
// securityContext, while f returns true.
func (v *podView) containers(list string, f func(name string, c, sc map[string]any) bool) {
	l, _ := v.t.Get(v.spec, list)
	items, _ := l.([]any)
	for i := range items {
		c, _ := v.t.At(items, i).(map[string]any)
		name, ok := nameOf(c)
		if !ok {
			name = strconv.Itoa(i)
		}
		sc, _ := v.t.GetMap(c, "securityContext")
		if !f(name, c, sc) {
			return
		}
	}
}

// overriddenIn finds a container of a Pod (of those only accepts, every one when nil) whose own
// securityContext overrides, with another value, a Pod-level field the policy sets: the field
// is there, its effect is not.
func overriddenIn(pod *podView, p *Policy, only func(list, name string) bool) (NotHeld, bool) {
	if pod == nil {
		return NotHeld{}, false
	}
	pspec, _ := p.Patch(profiles.KindPod)["spec"].(map[string]any)
	psc, _ := pspec["securityContext"].(map[string]any)
	if len(psc) == 0 {
		return NotHeld{}, false
	}
	podSC, _ := pod.t.GetMap(pod.spec, "securityContext")
	for _, f := range podOverridable {
		if psc[f] == nil {
			continue
		}
		podValue, _ := pod.t.Get(podSC, f)
		podValue = jsontree.ExpandAll(podValue)
		var found NotHeld
		for _, list := range containerListNames {
			pod.containers(list, func(name string, _, sc map[string]any) bool {
				own, set := pod.t.Get(sc, f)
				if !set || own == nil || (only != nil && !only(list, name)) {
					return true
				}
				if cmp := (comparison{}); cmp.same(jsontree.ExpandAll(own), podValue) {
					return true
				}
				found = NotHeld{Policy: p, Field: "spec." + list + "[" + name + "].securityContext." + f,
					Why: "the container's own value overrides the Pod-level one the policy sets", Overridden: true}
				return false
			})
			if found.Policy != nil {
				return found, true
			}
		}
	}
	return NotHeld{}, false
}

// enforceOf lists the enforce policies an enforce-only result selected: those it applied and
// those it left out, each once, in that order (r.Applied itself when none was left out).
func enforceOf(r Result) []*Policy {
	if len(r.Skipped) == 0 {
		return r.Applied
	}
	out := slices.Clone(r.Applied)
	seen := make(map[*Policy]bool, len(out)+len(r.Skipped))
	for _, p := range out {
		seen[p] = true
	}
	for _, sk := range r.Skipped {
		if sk.Policy.Mode == ModeEnforce && !seen[sk.Policy] {
			seen[sk.Policy] = true
			out = append(out, sk.Policy)
		}
	}
	return out
}
