package policies

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/policies/internal/jsontree"
)

// Valid in, valid out (reference §8): after the layers are applied, the patched object is checked as
// the API server will check it — its validation for the fields a policy can touch and their
// cross-field rules, the built-in admission plugins that run again after a webhook changed it
// (Priority, RuntimeClass, ServiceAccount, LimitRanger, PodSecurity), and the existence of the
// cluster objects it references. Only problems the object did not arrive with count ("no worse
// than given"). When there are any, the policies are added back one by one, highest precedence
// first, each kept only when the result gains no new problem; the others are left out for this
// object (Result.Skipped), named in an admission warning and counted by rule.

// Presence says whether a cluster object exists, as far as podpatch's caches know.
type Presence int8

// The three answers of a Cluster.
const (
	// Unknown: no cache, or the cache has not synced; checks that need the object are skipped.
	Unknown Presence = iota
	// Absent: the synced cache does not hold it; the admission plugin would refuse the object.
	Absent
	// Present: it exists.
	Present
)

// PriorityClassInfo is what the Priority admission plugin reads from a PriorityClass.
type PriorityClassInfo struct {
	Value int32
	// PreemptionPolicy is empty when the class does not set one.
	PreemptionPolicy string
}

// RuntimeClassInfo is what the RuntimeClass admission plugin reads from a RuntimeClass.
type RuntimeClassInfo struct {
	// Overhead is the class's pod overhead; nil when it has none.
	Overhead corev1.ResourceList
	// NodeSelector is the class's scheduling node selector, merged into the Pod's (a key with
	// another value is a conflict the plugin refuses).
	NodeSelector map[string]string
}

// Cluster answers, from caches kept current off the request path (never an API call), what the
// admission plugins will look up. A nil Cluster, as in `render` and `lint`, knows nothing: the
// checks that need it are skipped. Implementations answer Unknown until their caches synced.
// One that also knows Kueue's ResourceFlavors implements KueueFlavors (kueue.go).
type Cluster interface {
	// PriorityClass looks up a PriorityClass by name; the name "" asks for the cluster's global
	// default (Absent: there is none, and the plugin uses priority 0).
	PriorityClass(name string) (PriorityClassInfo, Presence)
	// RuntimeClass looks up a RuntimeClass by name.
	RuntimeClass(name string) (RuntimeClassInfo, Presence)
	// ServiceAccount says whether a ServiceAccount exists.
	ServiceAccount(namespace, name string) Presence
	// LimitRanges returns the limits of a namespace's LimitRanges; ok is false when unknown.
	LimitRanges(namespace string) (items []corev1.LimitRangeItem, ok bool)
	// ServiceIPFamilies returns the IP families the cluster allocates Service cluster IPs
	// from, the primary first (reference §8, validity_families.go); ok is false when unknown.
	ServiceIPFamilies() (families []corev1.IPFamily, ok bool)
}

// Violation is one reason the API server would refuse an object.
type Violation struct {
	// Rule is a stable, bounded id of the rule (the metric's label): request-above-limit, …
	Rule string
	// Field is the path of the offending field in the object.
	Field string
	// Message says what is wrong, for a person.
	Message string
}

func (v Violation) String() string { return v.Field + ": " + v.Message + " (" + v.Rule + ")" }

func compareViolations(a, b Violation) int {
	if c := strings.Compare(a.Field, b.Field); c != 0 {
		return c
	}
	return strings.Compare(a.Rule, b.Rule)
}

// key identifies a violation for the comparison with the object as given.
func (v Violation) key() string { return v.Rule + "\x00" + v.Field }

// Skipped is a policy left out of one object because its contribution would make the object
// invalid (reference §8).
type Skipped struct {
	Policy *Policy
	// Violation is the first problem the policy's contribution brought.
	Violation Violation
}

// String says which policy was left out and why, in one line.
func (s Skipped) String() string {
	what := "policy " + s.Policy.Ref
	if s.Policy.Mode == ModeEnforce {
		what = "enforce policy " + s.Policy.Ref + " (the audit reports the object)"
	}
	return fmt.Sprintf("%s left out: %s", what, s.Violation)
}

// checkEnv is what the checks know besides the object.
type checkEnv struct {
	kind            Kind
	namespace       string
	namespaceLabels map[string]string
	cluster         Cluster
}

// MaxViolations bounds the violations one check records: an object the API server would refuse
// for thousands of reasons (a hostile one) costs no more than this many. When the object as
// given has more, podpatch cannot tell which ones the policies add, and applies them all, as it
// would without the check.
const MaxViolations = 256

// check returns the violations of an object tree, and false when there were more than
// MaxViolations. It only reads (jsontree.Expand, never the tree's storing accessors), so it
// neither grows the JSONPatch's walk nor changes the object.
func (e *checkEnv) check(obj map[string]any) ([]Violation, bool) { return e.run(obj, false) }

// run is check; with full, it also checks parts of the object still raw, which a patched
// object's check skips for the rules whose parts no policy touched (they are as given).
func (e *checkEnv) run(obj map[string]any, full bool) ([]Violation, bool) {
	c := &checker{env: e, full: full}
	if e.kind == KindService {
		c.service(obj)
	} else {
		c.pod(obj)
	}
	c.metadata(obj)
	return c.out, !c.truncated
}

// checkInput returns the violations of the object as given.
func (e *checkEnv) checkInput(raw []byte) ([]Violation, bool) {
	obj, ok := jsontree.Expand(json.RawMessage(raw)).(map[string]any)
	if !ok {
		return nil, true
	}
	return e.run(obj, true)
}

// Check returns the reasons the API server would refuse an object as it is, by the rules of
// reference §8's check (Input.Kind, Object, Namespace, NamespaceLabels and Cluster are read): for
// `diff` ("would it become invalid") and the oracle tests that pin the rules. It returns at most
// MaxViolations.
func Check(in Input) ([]Violation, error) {
	if !json.Valid(in.Object) { // Expand trusts its input to be valid
		return nil, fmt.Errorf("decode %s: not valid JSON", strings.ToLower(string(in.Kind)))
	}
	obj, ok := jsontree.Expand(json.RawMessage(in.Object)).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("decode %s: expected a JSON object", strings.ToLower(string(in.Kind)))
	}
	ns := strOf(mapOf(obj["metadata"])["namespace"])
	if ns == "" {
		ns = in.Namespace
	}
	env := &checkEnv{kind: in.Kind, namespace: ns, namespaceLabels: in.NamespaceLabels, cluster: in.Cluster}
	vs, _ := env.run(obj, true)
	return vs, nil
}

// fresh returns the violations of got that given does not have.
func fresh(got, given []Violation) []Violation {
	if len(got) == 0 {
		return nil
	}
	had := make(map[string]bool, len(given))
	for _, v := range given {
		had[v.key()] = true
	}
	var out []Violation
	for _, v := range got {
		if !had[v.key()] {
			out = append(out, v)
		}
	}
	return out
}

// MaxValidityPasses bounds how often keepValid goes over the policies it left out: a policy
// may need another to be valid (a volumeMount and the volume it mounts), so those left out are
// tried again with what was kept, until a pass keeps none or this many passes ran. An object
// thus costs at most MaxValidityPasses applies per matching policy, and only when the policies
// would make it invalid.
const MaxValidityPasses = 3

// keepValid leaves out the policies whose contribution makes the object invalid. out is the
// result of applying every policy of l. In the common case (no new violation) it costs nothing
// more than the check already done.
func (s *Set) keepValid(in Input, patchOnly bool, env *checkEnv, manager Manager, l layers, out Result) (Result, error) {
	if len(out.violations) == 0 {
		return out, nil
	}
	given, complete := env.checkInput(in.Object)
	if !complete || len(fresh(out.violations, given)) == 0 {
		// No worse than given; or given so broken that new problems cannot be told apart (and
		// the API server refuses it anyway). Every violation of a truncated result that the
		// complete given lacks is new, so a truncated result needs no special case.
		return out, nil
	}
	// Highest precedence first (enforce, then merges, then defaults): where two policies
	// conflict, precedence decides which stays, as it decides which value wins, and a default
	// whose value a higher policy replaces stays, harmless. (Lowest first would leave out a
	// default that breaks the object only without the policy that overrides it; the next
	// admission of the result would keep it: not idempotent.)
	pending := slices.Clone(l.all())
	slices.Reverse(pending)
	keep := make(map[*Policy]bool, len(pending))
	best := Result{Object: in.Object}
	why := map[*Policy]Violation{}
	for pass := 0; pass < MaxValidityPasses && len(pending) > 0; pass++ {
		var next []*Policy
		for _, p := range pending {
			keep[p] = true
			res, _, err := s.applyLayers(in, patchOnly, nil, manager, l.only(keep), env)
			if errors.Is(err, ErrStopped) {
				// The budget ran out mid-search: what was kept is known valid and holds the
				// highest precedence (enforce first), so it applies; the rest is left out, said
				// so. Anything else would let whoever makes the search long (a tenant's
				// policies on their own Pods) switch the platform's enforce policies off.
				delete(keep, p)
				for _, q := range l.all() {
					if _, left := why[q]; !left && !keep[q] {
						why[q] = Violation{Rule: RuleBudget, Message: "the request budget ran out before podpatch could check this policy"}
					}
				}
				break
			}
			if err != nil {
				return Result{Object: in.Object}, err
			}
			if v := fresh(res.violations, given); len(v) > 0 {
				delete(keep, p)
				why[p] = slices.MinFunc(v, compareViolations) // the same one every time
				next = append(next, p)
				continue
			}
			delete(why, p)
			best = res
		}
		if len(next) == len(pending) || stopped(in.Done) {
			break // nothing more can be kept
		}
		pending = next
	}
	for _, p := range l.all() { // in application order
		if v, left := why[p]; left {
			best.Skipped = append(best.Skipped, Skipped{Policy: p, Violation: v})
		}
	}
	best.Warnings = append(best.Warnings, out.Warnings...)
	return best, nil
}

// only is the selection restricted to the policies in keep.
func (l *layers) only(keep map[*Policy]bool) layers {
	f := func(ps []*Policy) []*Policy {
		return slices.DeleteFunc(slices.Clone(ps), func(p *Policy) bool { return !keep[p] })
	}
	return layers{platformDefault: f(l.platformDefault), namespaceDefault: f(l.namespaceDefault),
		platformMerge: f(l.platformMerge), namespaceMerge: f(l.namespaceMerge), enforce: f(l.enforce)}
}

// Fields that must change together (reference §8): when the policies change the first, the second
// is removed, unless a policy sets it, so that the admission plugin that computes it from the
// first computes it again when it runs on the patched object.
var coupled = []struct {
	from   string
	remove []string
	why    string
}{
	// The Priority plugin refuses a Pod whose priority differs from its class's value.
	{"priorityClassName", []string{"priority", "preemptionPolicy"}, "the Priority admission plugin computes it from spec.priorityClassName"},
	// The RuntimeClass plugin refuses a Pod whose overhead differs from its class's.
	{"runtimeClassName", []string{"overhead"}, "the RuntimeClass admission plugin computes it from spec.runtimeClassName"},
}

// specString reads a string member of a pod's spec without changing the tree.
func specString(t *jsontree.Tree, obj map[string]any, k string) string {
	spec, _ := t.GetMap(obj, "spec")
	s, _ := jsontree.Expand(spec[k]).(string)
	return s
}

// couple applies the coupled-field rules to a patched Pod whose spec carried before (the values
// of couplingFields as given), and returns what it changed, for --explain.
func couple(t *jsontree.Tree, obj map[string]any, before *coupledValues, applied []*Policy, cluster Cluster) []string {
	spec, ok := t.GetMap(obj, "spec")
	if !ok {
		return nil
	}
	var adjusted []string
	for _, c := range coupled {
		now, _ := jsontree.Expand(spec[c.from]).(string)
		if now == before.of(c.from) {
			continue
		}
		removed := false
		for _, r := range c.remove {
			if _, present := spec[r]; !present || anySets(applied, r) {
				continue
			}
			delete(spec, r)
			removed = true
			adjusted = append(adjusted, "spec."+r+" removed: "+c.why)
		}
		if removed && cluster != nil {
			// Known from the caches: set what the plugin will compute, so that the object is
			// right even when the API server does not run the plugin again.
			adjusted = append(adjusted, computed(spec, c.from, now, cluster)...)
		}
	}
	// The deprecated spec.serviceAccount must name the same account as serviceAccountName.
	if now, _ := jsontree.Expand(spec["serviceAccountName"]).(string); now != before.of("serviceAccountName") {
		if old, present := jsontree.Expand(spec["serviceAccount"]).(string); present && old != now && !anySets(applied, "serviceAccount") {
			if now == "" {
				delete(spec, "serviceAccount")
			} else {
				spec["serviceAccount"] = now
			}
			adjusted = append(adjusted, "spec.serviceAccount set to spec.serviceAccountName: the deprecated field must agree")
		}
	}
	return adjusted
}

// computed sets, from a class the caches know, what the Priority or RuntimeClass plugin computes
// from it, and says what it set.
func computed(spec map[string]any, from, class string, cluster Cluster) []string {
	switch from {
	case "priorityClassName":
		info, p := cluster.PriorityClass(class)
		switch {
		case p == Unknown, p == Absent && class != "":
			return nil
		case p == Absent:
			info = PriorityClassInfo{} // no global default: priority 0
		}
		if info.PreemptionPolicy == "" {
			info.PreemptionPolicy = string(corev1.PreemptLowerPriority)
		}
		spec["priority"] = json.Number(strconv.Itoa(int(info.Value)))
		spec["preemptionPolicy"] = info.PreemptionPolicy
		return []string{"spec.priority and spec.preemptionPolicy set from PriorityClass " + strconv.Quote(class)}
	case "runtimeClassName":
		info, p := cluster.RuntimeClass(class)
		if p != Present || len(info.Overhead) == 0 {
			return nil
		}
		overhead := make(map[string]any, len(info.Overhead))
		for k, q := range info.Overhead {
			overhead[string(k)] = q.String()
		}
		spec["overhead"] = overhead
		return []string{"spec.overhead set from RuntimeClass " + strconv.Quote(class)}
	}
	return nil
}

// couplingFields are the spec members couple compares with the object as given.
var couplingFields = [...]string{"priorityClassName", "runtimeClassName", "serviceAccountName"}

// coupledValues are the values of couplingFields in the object as given.
type coupledValues [len(couplingFields)]string

// read records the values of couplingFields of a Pod.
func (v *coupledValues) read(t *jsontree.Tree, obj map[string]any) {
	for i, k := range couplingFields {
		v[i] = specString(t, obj, k)
	}
}

func (v *coupledValues) of(field string) string {
	for i, k := range couplingFields {
		if k == field {
			return v[i]
		}
	}
	return ""
}

// anySets reports whether a policy sets (not removes) a member of the pod spec.
func anySets(ps []*Policy, member string) bool {
	for _, p := range ps {
		spec, _ := p.patchFor(KindPod)["spec"].(map[string]any)
		if spec[member] != nil {
			return true
		}
	}
	return false
}

// equalizeNonOvercommittable is the coupled-field rule of resources that cannot be overcommitted
// (extended resources such as nvidia.com/gpu, huge pages): their request must equal their limit,
// and lint keeps a policy from setting the request alone, so a patched container whose request
// differs from its limit had its limit changed by a policy: the request follows it (and goes
// with a limit a policy removed). The API server defaults only a missing request, so without
// this a policy changing the GPU limit of a Pod that requests GPUs would get it refused. It runs
// only when the check found such a mismatch, and returns what it changed.
func equalizeNonOvercommittable(t *jsontree.Tree, obj map[string]any) []string {
	spec, ok := t.GetMap(obj, "spec")
	if !ok {
		return nil
	}
	var adjusted []string
	for _, list := range []string{"initContainers", "containers"} {
		v, _ := t.Get(spec, list)
		containers, _ := v.([]any)
		for i := range containers {
			c, ok := t.At(containers, i).(map[string]any)
			if !ok {
				continue
			}
			r, ok := t.GetMap(c, "resources")
			if !ok {
				continue
			}
			requests, ok := t.GetMap(r, "requests")
			if !ok {
				continue
			}
			limits, _ := t.GetMap(r, "limits")
			for name, rv := range requests {
				if resourceOvercommitAllowed(name) {
					continue
				}
				lv, hasLimit := limits[name]
				req, _ := quantityOf(rv)
				lim, _ := quantityOf(lv)
				switch {
				case !hasLimit:
					delete(requests, name)
				case req.Cmp(lim) != 0:
					requests[name] = lv
				default:
					continue
				}
				adjusted = append(adjusted, "spec."+list+"["+strOf(c["name"])+"].resources.requests["+name+"] set to its limit: "+name+" cannot be overcommitted")
			}
		}
	}
	return adjusted
}

// RuleBudget is the reason of a policy left out because the request budget ran out before
// podpatch could check that it keeps the object valid.
const RuleBudget = "budget"

// stopped reports whether the request budget has run out.
func stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
