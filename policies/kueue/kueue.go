// Package kueue keeps Kueue's placement on the Pods Kueue manages (reference §8,
// kueue-placement-conflict): the engine reads a Pod's placement as given (Read) and, after its
// policies applied, puts back what Kueue's ResourceFlavors decide (Keep), each field a finding.
// Kueue's marks on a Pod (its labels and scheduling gates), the keys its flavors decide and what
// each flavor writes (Keys, answered by the cluster's caches through Flavors) are here too.
// Labels are the Pod's creator's to write: they never defer anything on their own; only what
// Kueue itself shows does (its admission gate, or a flavor's whole placement written into the
// Pod), so that a label cannot take a Pod out of an enforced placement. It sits under the
// engine (package policies), which calls it during every Pod's apply.
package kueue

import (
	"fmt"
	"slices"
	"sort"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/profiles"
)

// Kueue's own marks on a Pod it manages (reference §8, kueue-placement-conflict), as Kueue
// v0.17 writes them (sigs.k8s.io/kueue pkg/constants, pkg/controller/constants,
// pkg/controller/jobs/pod/constants):
const (
	// QueueLabel names the LocalQueue; the user (or a Job's template) sets it.
	QueueLabel = "kueue.x-k8s.io/queue-name"
	// ManagedLabel is set by Kueue's pod webhook on a plain Pod it gates.
	ManagedLabel = "kueue.x-k8s.io/managed"
	// PodSetLabel is written by Kueue into a job's pod templates (RayCluster, RayJob, Job,
	// …) when it admits the workload, so every Pod the job's controller makes carries it.
	PodSetLabel = "kueue.x-k8s.io/podset"
	// PodGroupLabel groups plain Pods into one workload.
	PodGroupLabel = "kueue.x-k8s.io/pod-group-name"
	// LocalQueueLabel and ClusterQueueLabel are written next to the podset label
	// (feature AssignQueueLabelsForPods, on by default).
	LocalQueueLabel   = "kueue.x-k8s.io/local-queue-name"
	ClusterQueueLabel = "kueue.x-k8s.io/cluster-queue-name"
	// AdmissionGate is the scheduling gate Kueue's pod webhook adds to a plain Pod and
	// lifts, writing the flavor's node labels and tolerations, when it admits the workload.
	AdmissionGate = "kueue.x-k8s.io/admission"
	// TopologyGate is the gate of Kueue's topology-aware scheduling, which its pod webhook
	// adds too.
	TopologyGate = "kueue.x-k8s.io/topology"
)

// markLabels are the labels any one of which makes a Pod Kueue's.
var markLabels = []string{QueueLabel, ManagedLabel, PodSetLabel, PodGroupLabel,
	LocalQueueLabel, ClusterQueueLabel}

// Keys are the placement keys Kueue decides through its ResourceFlavors: the node label
// keys of every flavor's spec.nodeLabels, and the keys of its spec.tolerations and
// spec.nodeTaints; and what each flavor writes into the Pods Kueue admits on it (Flavors), by
// which a Pod shows that Kueue admitted it.
type Keys struct {
	NodeLabels  map[string]bool
	Tolerations map[string]bool
	// Flavors are the flavors that write placement (node labels or tolerations); one that
	// writes none marks no Pod and may be left out.
	Flavors []Flavor
	// Absent: the API server answers that it serves no ResourceFlavor API: no Kueue runs, no
	// key is Kueue's. A Pod carrying Kueue's admission gate makes the answer unknown all the same
	// (Kueue's webhook may have been installed since the last discovery).
	Absent bool
}

// Flavor is what one ResourceFlavor writes into the Pods Kueue admits on it: its
// spec.nodeLabels into spec.nodeSelector, its spec.tolerations into spec.tolerations.
type Flavor struct {
	NodeLabels  map[string]string
	Tolerations []Toleration
}

// Toleration is a flavor's toleration as Kueue copies it into a Pod (tolerationSeconds aside);
// an empty Operator reads as Equal, as the API server reads it.
type Toleration struct {
	Key, Operator, Value, Effect string
}

// Flavors is the part of the cluster lookups (validity.Lookups) that knows Kueue's ResourceFlavors
// (internal/references implements it). A Cluster without it, or one that answers false (cache not
// synced, discovery failing), leaves the flavors unknown: then every placement contribution but
// an enforce policy's is left out of a Pod marked as Kueue's (Keep).
type Flavors interface {
	// KueuePlacementKeys returns the keys the cluster's ResourceFlavors decide and what each
	// writes; ok is false when unknown.
	KueuePlacementKeys() (keys Keys, ok bool)
}

// Enforcer is a policy that can say whether it is an enforce policy (reference §2): its
// placement is never left out for want of knowing Kueue's flavors. A policy that cannot say is
// taken as one.
type Enforcer interface {
	Enforced() bool
}

// marks reports whether a Pod carries one of Kueue's marks (marked: a label of Kueue's, or its
// admission or topology scheduling gate) and whether it carries Kueue's admission gate (gated).
// A mark alone is the Pod creator's claim; the admission gate is Kueue's webhook's hand (or, on
// a cluster without Kueue, a gate nothing lifts: the Pod never runs).
func marks(t *jsontree.Tree, obj map[string]any) (marked, gated bool) {
	meta, _ := t.GetMap(obj, "metadata")
	lv, _ := t.Get(meta, "labels")
	if ls, ok := lv.(map[string]any); ok {
		for _, k := range markLabels {
			if v, set := t.Get(ls, k); set && v != nil {
				marked = true
				break
			}
		}
	}
	spec, _ := t.GetMap(obj, "spec")
	gv, _ := t.Get(spec, "schedulingGates")
	gates, _ := gv.([]any)
	for i := range gates {
		g, _ := t.At(gates, i).(map[string]any)
		switch n, _ := t.Get(g, "name"); n {
		case AdmissionGate:
			return true, true
		case TopologyGate:
			marked = true
		}
	}
	return marked, false
}

// MarkWritten returns where a policy's pod part sets one of Kueue's marks — one of its labels
// (metadata.labels[<key>]), or its admission or topology scheduling gate
// (spec.schedulingGates[<name>]), what marks reads on a Pod — or "" when it sets none.
func MarkWritten(patch map[string]any) string {
	meta, _ := patch["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	for _, k := range markLabels {
		if labels[k] != nil {
			return "metadata.labels[" + k + "]"
		}
	}
	spec, _ := patch["spec"].(map[string]any)
	gates, _ := spec["schedulingGates"].([]any)
	for _, g := range gates {
		gm, _ := g.(map[string]any)
		if n, _ := gm["name"].(string); n == AdmissionGate || n == TopologyGate {
			return "spec.schedulingGates[" + n + "]"
		}
	}
	return ""
}

// Placement is a Pod's placement fields as they were before the policies: each member as it
// was (raw or a copy) and, once decoded, its complete decoded form.
type Placement struct {
	managed  bool    // one of Kueue's marks, as given
	gated    bool    // Kueue's admission gate, as given
	had      [3]bool // nodeSelector, tolerations, affinity present
	raw      [3]any
	selector map[string]any
	tols     []any
	required any // spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
}

var placementFields = [3]string{"nodeSelector", "tolerations", "affinity"}

// Marked reports whether the Pod carried one of Kueue's marks as given.
func (p *Placement) Marked() bool { return p.managed }

// Read records a Pod's placement before the policies apply: a reference to each
// member still raw (the common case: nothing is decoded), a copy of one already decoded.
func Read(t *jsontree.Tree, obj map[string]any) Placement {
	var p Placement
	p.managed, p.gated = marks(t, obj)
	spec, _ := t.GetMap(obj, "spec")
	for i, f := range placementFields {
		v, ok := spec[f]
		if !ok {
			continue
		}
		p.had[i] = true
		if jsontree.IsRaw(v) {
			p.raw[i] = v // raw bytes are never changed in place
		} else {
			p.raw[i] = copyOf(v)
		}
	}
	return p
}

// decode fills the decoded forms, for a Pod found Kueue-managed.
func (p *Placement) decode() {
	p.selector, _ = full(p.raw[0]).(map[string]any)
	p.tols, _ = full(p.raw[1]).([]any)
	if aff, ok := full(p.raw[2]).(map[string]any); ok {
		if na, ok := aff["nodeAffinity"].(map[string]any); ok {
			p.required = na["requiredDuringSchedulingIgnoredDuringExecution"]
		}
	}
}

// copyOf copies a JSON tree as it is, nulls included.
func copyOf(v any) any {
	out, _ := jsontree.Copy(v, false)
	return out
}

// full is a complete, independent decoded copy of a member.
func full(v any) any {
	if v == nil {
		return nil
	}
	return jsontree.ExpandAll(copyOf(v))
}

// Keep puts back the placement Kueue decides on a Pod marked as Kueue's after the policies
// applied (reference §8, kueue-placement-conflict), and only where Kueue itself shows that it
// decides it (a label is the Pod creator's to write, and proves nothing):
//
//   - flavors known, and the Pod as given carries the whole placement of one of the flavors
//     (Kueue's admission wrote it into the Pod's template): every key of a flavor's node labels
//     in spec.nodeSelector, every toleration of a flavor's keys, and the required node affinity
//     when it names a flavor key stay as the Pod came;
//   - flavors known, and the Pod carries Kueue's admission gate (Kueue writes the flavor's
//     placement when it lifts it) but no flavor's placement: the same, except what an enforce
//     policy sets — the Pod's owner may lift the gate too, and the Pod must then run within the
//     enforced placement (Kueue then admits it only on a flavor that matches it);
//   - flavors known, and the Pod shows neither (a label alone; or no ResourceFlavor API served,
//     hence no Kueue): nothing is put back, every policy's placement applies;
//   - flavors unknown (discovery failing, cache not synced, no cluster; or no ResourceFlavor API
//     while the Pod carries Kueue's admission gate): all of spec.nodeSelector, spec.tolerations
//     and the required node affinity stay as the Pod came, except what an enforce policy sets:
//     the enforced placement is never escaped by making podpatch's lookups unknown.
//
// What policies set elsewhere stays. It returns one finding per field put back, naming the
// policy when one alone sets that field. flavors answers which keys are Kueue's; nil: unknown.
func Keep[P checks.Policy](t *jsontree.Tree, obj map[string]any, before *Placement, applied []P, flavors Flavors) []checks.Finding {
	if m, _ := marks(t, obj); !before.managed && !m { // as given, or as patched
		return nil
	}
	spec, _ := t.GetMap(obj, "spec")
	if spec == nil {
		return nil
	}
	var r rule
	if flavors != nil {
		r.keys, r.known = flavors.KueuePlacementKeys()
	}
	if r.known && r.keys.Absent && before.gated {
		r.known = false // Kueue's webhook gated it: Kueue may have come since the last discovery
	}
	before.decode()
	admitted := r.known && before.admitted(r.keys.Flavors)
	if r.known && !admitted && !before.gated {
		return nil // Kueue shows no hand in this Pod: its marks are its creator's
	}
	if !admitted {
		// Unknown flavors, or only the gate, which the Pod's owner can lift as well as Kueue:
		// the enforce policies' placement stays.
		r.keepEnforced, r.enforced = true, enforcedPlacement(applied)
	}
	k := keeper[P]{t: t, spec: spec, before: before, r: r, applied: applied, why: keptWhy(&r)}
	var out []checks.Finding
	out = k.nodeSelector(out)
	out = k.tolerations(out)
	out = k.requiredAffinity(out)
	return out
}

// keptWhy is the reason the findings of Keep give: the flavors decide the key, or, unknown or
// not served, all placement but the enforced is Kueue's.
func keptWhy(r *rule) string {
	why := "the keys Kueue's ResourceFlavors decide are unknown (no cluster to ask, cache not synced or discovery failing), so all placement but the enforced is Kueue's"
	if r.keys.Absent {
		why = "the Pod carries Kueue's admission gate but no ResourceFlavor API is served yet, so all placement but the enforced is Kueue's"
	}
	if r.known {
		why = "Kueue's ResourceFlavor decides this key"
	}
	return why
}

// keeper puts Kueue's placement back on one Pod for Keep, member by member; each step appends a
// finding per field put back. The findings are not a field: a keeper that stored them would
// make escape analysis move the given placement, and the caller's state holding it, to the
// heap on every admission.
type keeper[P checks.Policy] struct {
	t       *jsontree.Tree
	spec    map[string]any // the Pod's spec, as patched
	before  *Placement     // its placement as given, decoded
	r       rule           // what is left as the Pod came
	applied []P
	why     string // the findings' reason (keptWhy)
}

// add appends to out the finding of a field put back, naming the one applied policy that sets
// spec.<member> (its key, when key is not "").
func (k *keeper[P]) add(out []checks.Finding, field, member, key string) []checks.Finding {
	return append(out, checks.Finding{
		Check: checks.KueuePlacement, Severity: checks.SeverityWarning, Policy: soleSetter(k.applied, member, key), Field: field,
		Message: "left out on a Pod that Kueue manages: " + k.why,
		Fix:     "set placement on the ResourceFlavor, or select Pods without Kueue's labels",
	})
}

// nodeSelector puts back spec.nodeSelector key by key: each of the rule's keys the policies
// set, changed or removed, in key order.
func (k *keeper[P]) nodeSelector(out []checks.Finding) []checks.Finding {
	t, spec, before, r := k.t, k.spec, k.before, &k.r
	if v, ok := spec["nodeSelector"]; ok && !jsontree.IsRaw(v) || !ok && before.had[0] {
		sel, _ := t.GetMap(spec, "nodeSelector")
		var changed []string
		for key, pv := range sel {
			if !r.node(key) {
				continue
			}
			pv = full(pv)
			if ov, had := before.selector[key]; !had || jsontree.Canonical(ov) != jsontree.Canonical(pv) {
				changed = append(changed, key)
			}
		}
		for key := range before.selector {
			if _, kept := sel[key]; !kept && r.node(key) {
				changed = append(changed, key)
			}
		}
		sort.Strings(changed)
		for _, key := range changed {
			if ov, had := before.selector[key]; had {
				if sel == nil {
					sel = map[string]any{}
					spec["nodeSelector"] = sel
				}
				sel[key] = ov
			} else {
				delete(sel, key)
			}
			out = k.add(out, "spec.nodeSelector."+key, "nodeSelector", key)
		}
		if sel != nil && len(sel) == 0 && !before.had[0] {
			delete(spec, "nodeSelector")
		}
	}
	return out
}

// tolerations puts back spec.tolerations: those of the rule's keys (an empty key tolerates
// every taint) as given, one finding per key whose tolerations the policies added or removed.
func (k *keeper[P]) tolerations(out []checks.Finding) []checks.Finding {
	t, spec, before, r := k.t, k.spec, k.before, &k.r
	if v, ok := spec["tolerations"]; ok && !jsontree.IsRaw(v) || !ok && before.had[1] {
		decided := func(item any) (string, bool) {
			m, _ := item.(map[string]any)
			key, _ := m["key"].(string)
			return key, r.tol(key)
		}
		given := map[string]int{}
		for _, item := range before.tols {
			if _, d := decided(item); d {
				given[jsontree.Canonical(item)]++
			}
		}
		lv, _ := t.Get(spec, "tolerations")
		list, _ := lv.([]any)
		kept := make([]any, 0, len(list))
		var dropped []string
		for i := range list {
			item := full(t.At(list, i))
			if key, d := decided(item); d {
				c := jsontree.Canonical(item)
				if given[c] == 0 {
					dropped = append(dropped, key)
					continue
				}
				given[c]--
			}
			kept = append(kept, list[i])
		}
		for _, item := range before.tols { // given ones the policies removed
			if key, d := decided(item); d && given[jsontree.Canonical(item)] > 0 {
				given[jsontree.Canonical(item)]--
				kept = append(kept, item)
				dropped = append(dropped, key)
			}
		}
		if len(dropped) > 0 {
			switch {
			case len(kept) == 0 && !before.had[1]:
				delete(spec, "tolerations")
			case before.had[1] && jsontree.Canonical(kept) == jsontree.Canonical(before.tols):
				spec["tolerations"] = before.raw[1]
			default:
				spec["tolerations"] = kept
			}
			slices.Sort(dropped)
			for _, key := range slices.Compact(dropped) {
				out = k.add(out, fmt.Sprintf("spec.tolerations[key=%s]", key), "tolerations", "")
			}
		}
	}
	return out
}

// requiredAffinity puts back the required node affinity, as one: Kueue's flavor assignment
// reads it whole.
func (k *keeper[P]) requiredAffinity(out []checks.Finding) []checks.Finding {
	t, spec, before := k.t, k.spec, k.before
	if v, ok := spec["affinity"]; ok && !jsontree.IsRaw(v) || !ok && before.had[2] {
		aff, _ := t.GetMap(spec, "affinity")
		na, _ := t.GetMap(aff, "nodeAffinity")
		var req any
		if na != nil {
			req = full(na["requiredDuringSchedulingIgnoredDuringExecution"])
		}
		if jsontree.Canonical(req) != jsontree.Canonical(before.required) && k.r.affinity(req, before.required) {
			restoreRequired(spec, before)
			out = k.add(out, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", "affinity", "")
		}
	}
	return out
}

// restoreRequired puts the required node affinity back as given, dropping the objects the
// policies brought only for it.
func restoreRequired(spec map[string]any, before *Placement) {
	const req = "requiredDuringSchedulingIgnoredDuringExecution"
	aff, _ := spec["affinity"].(map[string]any)
	if aff == nil {
		if before.required == nil {
			return
		}
		aff = map[string]any{}
		spec["affinity"] = aff
	}
	na, _ := aff["nodeAffinity"].(map[string]any)
	if na == nil {
		na = map[string]any{}
		aff["nodeAffinity"] = na
	}
	if before.required != nil {
		na[req] = copyOf(before.required)
	} else {
		delete(na, req)
	}
	if len(na) == 0 {
		delete(aff, "nodeAffinity")
	}
	if len(aff) == 0 && !before.had[2] {
		delete(spec, "affinity")
	}
}

// namesKey reports whether a required node selector's match expressions name one of keys.
func namesKey(required any, keys map[string]bool) bool {
	sel, _ := required.(map[string]any)
	terms, _ := sel["nodeSelectorTerms"].([]any)
	for _, term := range terms {
		tm, _ := term.(map[string]any)
		exprs, _ := tm["matchExpressions"].([]any)
		for _, e := range exprs {
			em, _ := e.(map[string]any)
			if k, _ := em["key"].(string); keys[k] {
				return true
			}
		}
	}
	return false
}

// soleSetter is the Ref of the one applied policy whose pod template sets spec.<member> (the
// key of it, when key is not ""); "" when none or several do.
func soleSetter[P checks.Policy](applied []P, member, key string) string {
	ref := ""
	for _, p := range applied {
		spec, _ := p.Patch(profiles.KindPod)["spec"].(map[string]any)
		v, ok := spec[member]
		if !ok {
			continue
		}
		if key != "" {
			m, _ := v.(map[string]any)
			if _, ok := m[key]; !ok {
				continue
			}
		}
		if ref != "" {
			return ""
		}
		ref = p.Provenance()
	}
	return ref
}
