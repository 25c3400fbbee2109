package policies

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/podpatch/podpatch/policies/checks"
	"github.com/podpatch/podpatch/policies/internal/jsontree"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/validity"
)

// Kueue's own marks on a Pod it manages (reference §8, kueue-placement-conflict), as Kueue
// v0.17 writes them (sigs.k8s.io/kueue pkg/constants, pkg/controller/constants,
// pkg/controller/jobs/pod/constants):
const (
	// KueueQueueLabel names the LocalQueue; the user (or a Job's template) sets it.
	KueueQueueLabel = "kueue.x-k8s.io/queue-name"
	// KueueManagedLabel is set by Kueue's pod webhook on a plain Pod it gates.
	KueueManagedLabel = "kueue.x-k8s.io/managed"
	// KueuePodSetLabel is written by Kueue into a job's pod templates (RayCluster, RayJob, Job,
	// …) when it admits the workload, so every Pod the job's controller makes carries it.
	KueuePodSetLabel = "kueue.x-k8s.io/podset"
	// KueuePodGroupLabel groups plain Pods into one workload.
	KueuePodGroupLabel = "kueue.x-k8s.io/pod-group-name"
	// KueueLocalQueueLabel and KueueClusterQueueLabel are written next to the podset label
	// (feature AssignQueueLabelsForPods, on by default).
	KueueLocalQueueLabel   = "kueue.x-k8s.io/local-queue-name"
	KueueClusterQueueLabel = "kueue.x-k8s.io/cluster-queue-name"
	// KueueAdmissionGate is the scheduling gate Kueue's pod webhook adds to a plain Pod and
	// lifts, writing the flavor's node labels and tolerations, when it admits the workload.
	KueueAdmissionGate = "kueue.x-k8s.io/admission"
	// KueueTopologyGate is the gate of Kueue's topology-aware scheduling, which its pod webhook
	// adds too.
	KueueTopologyGate = "kueue.x-k8s.io/topology"
)

// kueueLabels are the labels any one of which makes a Pod Kueue's.
var kueueLabels = []string{KueueQueueLabel, KueueManagedLabel, KueuePodSetLabel, KueuePodGroupLabel,
	KueueLocalQueueLabel, KueueClusterQueueLabel}

// KueueKeys are the placement keys Kueue decides through its ResourceFlavors: the node label
// keys of every flavor's spec.nodeLabels, and the keys of its spec.tolerations and
// spec.nodeTaints.
type KueueKeys struct {
	NodeLabels  map[string]bool
	Tolerations map[string]bool
}

// KueueFlavors is the part of a Cluster that knows Kueue's ResourceFlavors (webhook/references.go
// implements it). A Cluster without it, or one that answers false (no ResourceFlavor API, cache
// not synced), leaves every placement contribution out of a Kueue-managed Pod.
type KueueFlavors interface {
	// KueuePlacementKeys returns the keys the cluster's ResourceFlavors decide; ok is false
	// when unknown.
	KueuePlacementKeys() (keys KueueKeys, ok bool)
}

// kueueManaged reports whether a Pod shows that Kueue manages it: one of Kueue's labels, or
// Kueue's admission scheduling gate.
func kueueManaged(t *jsontree.Tree, obj map[string]any) bool {
	meta, _ := t.GetMap(obj, "metadata")
	lv, _ := t.Get(meta, "labels")
	if ls, ok := lv.(map[string]any); ok {
		for _, k := range kueueLabels {
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
		if n, _ := t.Get(g, "name"); n == KueueAdmissionGate || n == KueueTopologyGate {
			return true
		}
	}
	return false
}

// placement is a Pod's placement fields as they were before the policies: each member as it
// was (raw or a copy) and, once decoded, its complete decoded form.
type placement struct {
	managed  bool
	had      [3]bool // nodeSelector, tolerations, affinity present
	raw      [3]any
	selector map[string]any
	tols     []any
	required any // spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
}

var placementFields = [3]string{"nodeSelector", "tolerations", "affinity"}

// readPlacement records a Pod's placement before the policies apply: a reference to each
// member still raw (the common case: nothing is decoded), a copy of one already decoded.
func readPlacement(t *jsontree.Tree, obj map[string]any) placement {
	p := placement{managed: kueueManaged(t, obj)}
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
			p.raw[i] = deepCopy(v)
		}
	}
	return p
}

// decode fills the decoded forms, for a Pod found Kueue-managed.
func (p *placement) decode() {
	p.selector, _ = full(p.raw[0]).(map[string]any)
	p.tols, _ = full(p.raw[1]).([]any)
	if aff, ok := full(p.raw[2]).(map[string]any); ok {
		if na, ok := aff["nodeAffinity"].(map[string]any); ok {
			p.required = na["requiredDuringSchedulingIgnoredDuringExecution"]
		}
	}
}

// full is a complete, independent decoded copy of a member.
func full(v any) any {
	if v == nil {
		return nil
	}
	return jsontree.ExpandAll(deepCopy(v))
}

// keepKueuePlacement puts back the placement Kueue decides on a Kueue-managed Pod after the
// policies applied (reference §8, kueue-placement-conflict): every key of a flavor's node
// labels in spec.nodeSelector, every toleration of a flavor's keys, and the required node
// affinity when it names a flavor key, as the Pod came; with keys unknown, all of
// spec.nodeSelector, spec.tolerations and the required node affinity. What policies set
// elsewhere stays. It returns one finding per field put back, naming the policy when one
// alone sets that field.
func keepKueuePlacement(t *jsontree.Tree, obj map[string]any, before *placement, applied []*Policy, cluster validity.Cluster) []checks.Finding {
	if !before.managed && !kueueManaged(t, obj) { // as given, or as patched
		return nil
	}
	before.decode()
	var keys KueueKeys
	known := false
	if kf, ok := cluster.(KueueFlavors); ok {
		keys, known = kf.KueuePlacementKeys()
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
func restoreRequired(spec map[string]any, before *placement) {
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
		na[req] = deepCopy(before.required)
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
func soleSetter(applied []*Policy, member, key string) string {
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
		ref = p.Ref
	}
	return ref
}

// dropRestored takes out of the explanations the placement fields that keepKueuePlacement put
// back: a field a policy changed on its way that the patched object no longer differs in.
func dropRestored(changes []Change, given []byte, obj map[string]any) []Change {
	in := jsontree.ExpandAll(jsontree.New().Decode(given))
	final := diffPaths(in, jsontree.ExpandAll(deepCopy(obj)))
	differs := func(f string) bool {
		for _, d := range final {
			if d == f || strings.HasPrefix(d, f+".") || strings.HasPrefix(d, f+"[") ||
				strings.HasPrefix(f, d+".") || strings.HasPrefix(f, d+"[") {
				return true
			}
		}
		return false
	}
	for i, c := range changes {
		changes[i].Fields = slices.DeleteFunc(slices.Clone(c.Fields), func(f string) bool {
			placementPath := strings.HasPrefix(f, "spec.nodeSelector") || strings.HasPrefix(f, "spec.tolerations") ||
				strings.HasPrefix(f, "spec.affinity")
			return placementPath && !differs(f)
		})
	}
	return changes
}
