package checks

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/k8sfields"
	"github.com/podpatch/podpatch/policies/profiles"
)

// Policy is what the checks read of a policy that applied (the engine's *policies.Policy): its
// patch of a kind of object as written, nulls kept, read only; and the provenance entry a
// finding names it by. The checks sit below the engine, which hands them its applied policies
// as they are: a type parameter, so that no admission copies them.
type Policy interface {
	Patch(kind profiles.Kind) map[string]any
	Provenance() string
}

// Run runs the manager-aware checks (reference §8) on a patched object: given is the object as
// it came in, patched its tree after the policies applied (read only), applied the policies in
// application order. A check fires only where a policy's contribution changed a figure the
// manager stated elsewhere (its process's flags, env or properties), and names that policy. It
// reads only, and costs nothing for objects no applied policy could concern (concern). At most
// MaxFindings.
func Run[P Policy](kind profiles.Kind, id profiles.Identity, given []byte, patched map[string]any, applied []P) []Finding {
	if patched == nil || !concern(kind, id, applied) {
		return nil
	}
	var out []Finding
	if kind == profiles.KindService {
		out = checkDaskLoadBalancer(id, given, patched, applied)
	} else {
		after := readMainContainer(patched, id.Manager, "")
		if !after.found {
			return nil
		}
		f := &podFacts[P]{id: id, sizes: profiles.SizesOf(id.Manager), after: after, given: given, applied: applied}
		switch id.Manager {
		case profiles.ManagerRay:
			out = checkRay(f)
		case profiles.ManagerDask, profiles.ManagerDaskGateway:
			out = checkDask(f)
		case profiles.ManagerSpark:
			out = checkSpark(f)
		case profiles.ManagerFlink:
			out = checkFlink(f)
		}
	}
	if len(out) > MaxFindings {
		out = out[:MaxFindings]
	}
	return out
}

// concern reports whether an applied policy could fire a check: for a Pod, one that sets
// the resources of a container; for a Dask scheduler Service, one that sets spec.type. It reads
// the policies only, so admissions no check concerns pay nothing more.
func concern[P Policy](kind profiles.Kind, id profiles.Identity, applied []P) bool {
	if kind == profiles.KindService {
		if id.Manager != profiles.ManagerDask || id.Role != profiles.RoleScheduler {
			return false
		}
		return slices.ContainsFunc(applied, func(p P) bool {
			spec, _ := p.Patch(profiles.KindService)["spec"].(map[string]any)
			_, ok := spec["type"]
			return ok
		})
	}
	switch id.Manager {
	case profiles.ManagerRay, profiles.ManagerDask, profiles.ManagerDaskGateway, profiles.ManagerSpark, profiles.ManagerFlink:
	default:
		return false
	}
	return slices.ContainsFunc(applied, func(p P) bool {
		spec, _ := p.Patch(profiles.KindPod)["spec"].(map[string]any)
		list, _ := spec["containers"].([]any)
		for _, it := range list {
			if c, _ := it.(map[string]any); c != nil && c["resources"] != nil {
				return true
			}
		}
		return false
	})
}

// containerView is what the checks read of a manager's main container, bounded (parse.go).
type containerView struct {
	found            bool
	name             string
	limits, requests map[string]any
	c                map[string]any // the container, for its command words and env
}

// readMainContainer reads the main container of a Pod (the container named name, or, with name
// "", the manager's conventional one, else the first) and its resources, without changing the
// tree.
func readMainContainer(obj map[string]any, manager profiles.Manager, name string) containerView {
	spec, _ := jsontree.Expand(obj["spec"]).(map[string]any)
	list, _ := jsontree.Expand(spec["containers"]).([]any)
	var pick map[string]any
	for i, it := range list {
		c, _ := jsontree.Expand(it).(map[string]any)
		if c == nil {
			continue
		}
		n, _ := c["name"].(string)
		if name != "" {
			if n == name {
				pick = c
				break
			}
			continue
		}
		if i == 0 || pick == nil {
			pick = c
		}
		if profiles.IsMainContainer(manager, n) {
			pick = c
			break
		}
	}
	if pick == nil {
		return containerView{}
	}
	v := containerView{found: true, c: pick}
	v.name, _ = pick["name"].(string)
	res, _ := jsontree.Expand(pick["resources"]).(map[string]any)
	v.limits, _ = jsontree.Expand(res["limits"]).(map[string]any)
	v.requests, _ = jsontree.Expand(res["requests"]).(map[string]any)
	return v
}

// mentions reports whether the container's command or args hold one of names anywhere, read
// without decoding them: a check whose manager states nothing there stops before it costs.
func (v containerView) mentions(names []string) bool {
	for _, k := range []string{"command", "args"} {
		switch x := v.c[k].(type) {
		case json.RawMessage:
			for _, n := range names {
				if bytes.Contains(x, []byte(n)) {
					return true
				}
			}
		case []any:
			for _, it := range x {
				s, _ := it.(string)
				for _, n := range names {
					if strings.Contains(s, n) {
						return true
					}
				}
			}
		}
	}
	return false
}

// words are the container's command words (commandWords).
func (v containerView) words() []string {
	return commandWords(stringList(v.c["command"]), stringList(v.c["args"]))
}

// env reads the container's plain env values, the first maxCheckEnv entries.
func (v containerView) env() map[string]string {
	out := map[string]string{}
	envList, _ := jsontree.Expand(v.c["env"]).([]any)
	for i, it := range envList {
		if i == maxCheckEnv {
			break
		}
		e, _ := jsontree.Expand(it).(map[string]any)
		n, _ := e["name"].(string)
		val, ok := e["value"].(string)
		if n == "" || !ok {
			continue
		}
		if _, seen := out[n]; !seen {
			out[n] = val
		}
	}
	return out
}

// stringList reads a JSON list of strings, at most maxCheckArgs of them.
func stringList(v any) []string {
	list, _ := jsontree.Expand(v).([]any)
	if len(list) > maxCheckArgs {
		list = list[:maxCheckArgs]
	}
	out := make([]string, 0, len(list))
	for _, it := range list {
		if s, ok := it.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// podFacts are what a Pod's check reads: the manager's profile, the main container as patched
// and, read only once a check found the manager's statement, as given; and the policies applied.
type podFacts[P Policy] struct {
	id      profiles.Identity
	sizes   profiles.Sizes // the manager's profile's (SizesOf): read only
	after   containerView
	given   []byte
	applied []P

	beforeView *containerView
}

// before is the main container as given, decoded on first use.
func (f *podFacts[P]) before() containerView {
	if f.beforeView == nil {
		obj, _ := jsontree.Expand(json.RawMessage(f.given)).(map[string]any)
		v := readMainContainer(obj, f.id.Manager, f.after.name)
		f.beforeView = &v
	}
	return *f.beforeView
}

// figure is a resource of a container section ("limits", "requests"); false when absent or
// not a quantity.
func (v containerView) figure(section, name string) (resource.Quantity, bool) {
	m := v.limits
	if section == "requests" {
		m = v.requests
	}
	x, ok := m[name]
	if !ok {
		return resource.Quantity{}, false
	}
	return checkQuantity(x)
}

// changed reports whether the policies changed a resource of the main container's section.
func (f *podFacts[P]) changed(section, name string) bool {
	a, aok := f.after.figure(section, name)
	b, bok := f.before().figure(section, name)
	return aok != bok || aok && a.Cmp(b) != 0
}

// responsible names the policy whose contribution set a resource of the main container: of the
// applied policies (in application order, each later one wins a field it sets) the last whose
// pod patch sets it on the container by name, @main or the wildcard, in section, else in the
// other section (podpatch equalises an extended resource's request and limit), else "".
func (f *podFacts[P]) responsible(section, name string) string {
	for _, sec := range []string{section, otherSection(section)} {
		for i := len(f.applied) - 1; i >= 0; i-- {
			p := f.applied[i]
			spec, _ := p.Patch(profiles.KindPod)["spec"].(map[string]any)
			list, _ := spec["containers"].([]any)
			for _, it := range list {
				c, _ := it.(map[string]any)
				n, _ := c["name"].(string)
				if n != f.after.name && n != k8sfields.MainContainer && n != k8sfields.WildcardContainer {
					continue
				}
				res, _ := c["resources"].(map[string]any)
				s, _ := res[sec].(map[string]any)
				if _, ok := s[name]; ok {
					return p.Provenance()
				}
			}
		}
	}
	return ""
}

func otherSection(s string) string {
	if s == "limits" {
		return "requests"
	}
	return "limits"
}

// field is the path of a resource of the main container, as findings name it.
func (f *podFacts[P]) field(section, name string) string {
	return "spec.containers[" + clipName(f.after.name) + "].resources." + section + "." + name
}

// clipName bounds a name from the object in a finding: the API server validates names only
// after admission, so one may be of any length here.
func clipName(s string) string {
	if len(s) > 63 {
		return strings.ToValidUTF8(s[:63], "") + "…"
	}
	return s
}

// finding builds a finding about a resource of the main container, with the check's fix.
func (f *podFacts[P]) finding(check string, sev Severity, section, name, msg string) Finding {
	return Finding{Check: check, Severity: sev, Policy: f.responsible(section, name), Field: f.field(section, name), Message: msg, Fix: fixOf(check)}
}
