// Package kueue keeps Kueue's placement on the Pods Kueue manages (reference §8,
// kueue-placement-conflict): the engine reads a Pod's placement as given (Read) and, after its
// policies applied, puts back what Kueue's ResourceFlavors decide (Keep), each field a finding.
// Kueue's marks on a Pod (its labels and scheduling gates) and the keys its flavors decide
// (Keys, answered by the cluster's caches through Flavors) are here too. It sits under the
// engine (package policies), which calls it during every Pod's apply.
package kueue

import (
	"fmt"
	"slices"
	"sort"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/internal/jsontree"
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
// spec.nodeTaints.
type Keys struct {
	NodeLabels  map[string]bool
	Tolerations map[string]bool
}

// Flavors is the part of the cluster lookups (validity.Lookups) that knows Kueue's ResourceFlavors
// (internal/references implements it). A Cluster without it, or one that answers false (no ResourceFlavor API, cache
// not synced), leaves every placement contribution out of a Kueue-managed Pod.
type Flavors interface {
	// KueuePlacementKeys returns the keys the cluster's ResourceFlavors decide; ok is false
	// when unknown.
	KueuePlacementKeys() (keys Keys, ok bool)
}

// managed reports whether a Pod shows that Kueue manages it: one of Kueue's labels, or
// Kueue's admission scheduling gate.
func managed(t *jsontree.Tree, obj map[string]any) bool {
	meta, _ := t.GetMap(obj, "metadata")
	lv, _ := t.Get(meta, "labels")
	if ls, ok := lv.(map[string]any); ok {
		for _, k := range markLabels {
			if v, set := t.Get(ls, k); set && v != nil {
				return true
			}
		}
	}
	spec, _ := t.GetMap(obj, "spec")
	gv, _ := t.Get(spec, "schedulingGates")
	gates, _ := gv.([]any)
	for i := range gates {
		g, _ := t.At(gates, i).(map[string]any)
		if n, _ := t.Get(g, "name"); n == AdmissionGate || n == TopologyGate {
			return true
		}
	}
	return false
}

// Placement is a Pod's placement fields as they were before the policies: each member as it
// was (raw or a copy) and, once decoded, its complete decoded form.
type Placement struct {
	managed  bool
	had      [3]bool // nodeSelector, tolerations, affinity present
	raw      [3]any
	selector map[string]any
	tols     []any
	required any // spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
}

var placementFields = [3]string{"nodeSelector", "tolerations", "affinity"}

// Read records a Pod's placement before the policies apply: a reference to each
// member still raw (the common case: nothing is decoded), a copy of one already decoded.
func Read(t *jsontree.Tree, obj map[string]any) Placement {
	p := Placement{managed: managed(t, obj)}
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

// Keep puts back the placement Kueue decides on a Kueue-managed Pod after the
// policies applied (reference §8, kueue-placement-conflict): every key of a flavor's node
// labels in spec.nodeSelector, every toleration of a flavor's keys, and the required node
// affinity when it names a flavor key, as the Pod came; with keys unknown, all of
// spec.nodeSelector, spec.tolerations and the required node affinity. What policies set
// elsewhere stays. It returns one finding per field put back, naming the policy when one
// alone sets that field. flavors answers which keys are Kueue's; nil: unknown.
func Keep[P checks.Policy](t *jsontree.Tree, obj map[string]any, before *Placement, applied []P, flavors Flavors) []checks.Finding {
	if !before.managed && !managed(t, obj) { // as given, or as patched
		return nil
	}
	before.decode()
	var keys Keys
	known := false
	if flavors != nil {
		keys, known = flavors.KueuePlacementKeys()
	}
	spec, _ := t.GetMap(obj, "spec")
	if spec == nil {
		return nil
	}
	var out []checks.Finding
	why := "the keys Kueue's ResourceFlavors decide are unknown (no ResourceFlavor API or its cache has not synced), so all placement is Kueue's"
	if known {
		why = "Kueue's ResourceFlavor decides this key"
	}
	add := func(field, member, key string) {
		out = append(out, checks.Finding{
			Check: checks.KueuePlacement, Severity: checks.SeverityWarning, Policy: soleSetter(applied, member, key), Field: field,
			Message: "left out on a Pod that Kueue manages: " + why,
			Fix:     "set placement on the ResourceFlavor, or select Pods without Kueue's labels",
		})
	}

	// spec.nodeSelector, key by key.
	if v, ok := spec["nodeSelector"]; ok && !jsontree.IsRaw(v) || !ok && before.had[0] {
		sel, _ := t.GetMap(spec, "nodeSelector")
		var changed []string
		for k, pv := range sel {
			if known && !keys.NodeLabels[k] {
				continue
			}
			pv = full(pv)
			if ov, had := before.selector[k]; !had || jsontree.Canonical(ov) != jsontree.Canonical(pv) {
				changed = append(changed, k)
			}
		}
		for k := range before.selector {
			if _, kept := sel[k]; !kept && (!known || keys.NodeLabels[k]) {
				changed = append(changed, k)
			}
		}
		sort.Strings(changed)
		for _, k := range changed {
			if ov, had := before.selector[k]; had {
				if sel == nil {
					sel = map[string]any{}
					spec["nodeSelector"] = sel
				}
				sel[k] = ov
			} else {
				delete(sel, k)
			}
			add("spec.nodeSelector."+k, "nodeSelector", k)
		}
		if sel != nil && len(sel) == 0 && !before.had[0] {
			delete(spec, "nodeSelector")
		}
	}

	// spec.tolerations: those of Kueue's keys (an empty key tolerates every taint) as given.
	if v, ok := spec["tolerations"]; ok && !jsontree.IsRaw(v) || !ok && before.had[1] {
		decided := func(item any) (string, bool) {
			m, _ := item.(map[string]any)
			k, _ := m["key"].(string)
			return k, !known || k == "" || keys.Tolerations[k]
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
			if k, d := decided(item); d {
				c := jsontree.Canonical(item)
				if given[c] == 0 {
					dropped = append(dropped, k)
					continue
				}
				given[c]--
			}
			kept = append(kept, list[i])
		}
		for _, item := range before.tols { // given ones the policies removed
			if k, d := decided(item); d && given[jsontree.Canonical(item)] > 0 {
				given[jsontree.Canonical(item)]--
				kept = append(kept, item)
				dropped = append(dropped, k)
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
			for _, k := range slices.Compact(dropped) {
				add(fmt.Sprintf("spec.tolerations[key=%s]", k), "tolerations", "")
			}
		}
	}

	// The required node affinity, as one: Kueue's flavor assignment reads it whole.
	if v, ok := spec["affinity"]; ok && !jsontree.IsRaw(v) || !ok && before.had[2] {
		aff, _ := t.GetMap(spec, "affinity")
		na, _ := t.GetMap(aff, "nodeAffinity")
		var req any
		if na != nil {
			req = full(na["requiredDuringSchedulingIgnoredDuringExecution"])
		}
		if jsontree.Canonical(req) != jsontree.Canonical(before.required) &&
			(!known || namesKey(req, keys.NodeLabels) || namesKey(before.required, keys.NodeLabels)) {
			restoreRequired(spec, before)
			add("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", "affinity", "")
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
