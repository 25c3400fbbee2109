// Package placement is the `unschedulable` check of reference §8: whether a Pod's
// nodeSelector, required node affinity and tolerations leave it a place to run — a Node of the
// cluster, or a Karpenter NodePool or a GKE ComputeClass that could create one — so that
// `podpatch diff` (reference §10), `explain` and `lint --objects` can say when a policy change
// strands Pods before it is pushed.
//
// Nodes are matched with the scheduler's own predicates (k8s.io/component-helpers); NodePools
// with Karpenter's compatibility rules (requirements.go), read from their documented schema
// through the dynamic client, so that no cloud provider's module is a dependency.
package placement

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/checks"
)

// The bounds of a Snapshot: what one check looks at, whatever the size of the cluster.
const (
	// MaxNodes is how many Nodes a Snapshot holds; beyond, the check is not conclusive.
	MaxNodes = 5000
	// MaxNodePools is how many Karpenter NodePools a Snapshot holds.
	MaxNodePools = 500
	// MaxComputeClasses is how many GKE ComputeClasses a Snapshot holds.
	MaxComputeClasses = 500
)

// ComputeClassLabel is the nodeSelector key a Pod selects a GKE ComputeClass by.
const ComputeClassLabel = "cloud.google.com/compute-class"

// Snapshot is what a cluster offers Pods: its Nodes and, when their APIs exist, the Karpenter
// NodePools and GKE ComputeClasses that can create more. Build one with Read, or by hand.
type Snapshot struct {
	Nodes []*corev1.Node
	// NodePools are Karpenter's; HasKarpenter says the NodePool API exists (NodePools may
	// then still be none).
	NodePools    []NodePool
	HasKarpenter bool
	// ComputeClasses are GKE's, by name; HasComputeClasses says the API exists.
	ComputeClasses    map[string]ComputeClass
	HasComputeClasses bool
	// Truncated says some Nodes, NodePools or ComputeClasses were beyond the bounds: a Pod
	// none of those held fits is then not reported (it might fit one left out).
	Truncated bool
}

// NodePool is what the check reads of a `karpenter.sh/v1` NodePool.
type NodePool struct {
	Name string
	// Labels are spec.template.metadata.labels: every Node of the pool carries them.
	Labels map[string]string
	// Requirements are spec.template.spec.requirements.
	Requirements []Requirement
	// Taints are spec.template.spec.taints; startupTaints are not kept: Karpenter expects
	// them removed once the Node is ready, and Pods need not tolerate them.
	Taints []corev1.Taint
}

// Requirement is a NodePool requirement: a node selector requirement with Karpenter's
// minValues (how many values must stay possible for the key).
type Requirement struct {
	corev1.NodeSelectorRequirement
	MinValues *int
}

// ComputeClass is what the check reads of a `cloud.google.com/v1` ComputeClass.
type ComputeClass struct {
	Name string
	// AutoCreate is spec.nodePoolAutoCreation.enabled: GKE creates node pools for its Pods.
	AutoCreate bool
}

// Result is the verdict on one Pod.
type Result struct {
	// Schedulable is false when no Node fits and nothing could create one.
	Schedulable bool
	// Reason says why not (the first Node's and NodePool's refusals), in one line.
	Reason string
	// Known says the snapshot gave a verdict (it has Nodes or a way to create them, and was
	// not truncated): only then are Pools the whole answer.
	Known bool
	// Pools are the pools the Pod fits (PoolOf: the Nodes' pools, the Karpenter NodePools
	// that could create a Node for it, "computeclass/NAME" for a GKE ComputeClass that
	// creates node pools), sorted, at most MaxPools; MorePools counts the others.
	Pools     []string
	MorePools int
}

// PoolLabels are the labels naming the pool a Node belongs to, by provider: a GKE node pool,
// an EKS managed node group, a Karpenter NodePool.
var PoolLabels = []string{"cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", NodePoolLabel}

// MaxPools bounds Result.Pools: a cluster whose Nodes carry no pool label has a pool per Node.
const MaxPools = 100

// ComputeClassPool is the pool name of a GKE ComputeClass that creates node pools.
func ComputeClassPool(name string) string { return "computeclass/" + name }

// PoolOf is the pool a Node belongs to: the value of its provider's pool label (PoolLabels),
// else its name.
func PoolOf(n *corev1.Node) string {
	for _, l := range PoolLabels {
		if v, ok := n.Labels[l]; ok && v != "" {
			return v
		}
	}
	return n.Name
}

// SamePools says whether two verdicts name the same pools (by the first MaxPools and the count).
func SamePools(a, b Result) bool {
	return a.MorePools == b.MorePools && slices.Equal(a.Pools, b.Pools)
}

// Check says whether a pod spec has a place to run in the snapshot, and in which pools. It is
// linear in the snapshot's bounded size; a snapshot that is truncated, or has neither Nodes
// nor a way to create them, gives no verdict (Schedulable true, Known false).
func Check(spec *corev1.PodSpec, snap *Snapshot) Result {
	if snap == nil || spec == nil || (len(snap.Nodes) == 0 && !snap.HasKarpenter && !snap.HasComputeClasses) {
		return Result{Schedulable: true}
	}
	pod := &corev1.Pod{Spec: *spec}
	var why []string
	pools := map[string]bool{}
	if name, ok := spec.NodeSelector[ComputeClassLabel]; ok && snap.HasComputeClasses {
		cc, ok := snap.ComputeClasses[name]
		switch {
		case ok && cc.AutoCreate:
			pools[ComputeClassPool(name)] = true
		case !ok && !snap.Truncated:
			why = append(why, fmt.Sprintf("ComputeClass %q does not exist", name))
		}
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	for _, n := range snap.Nodes {
		pool := PoolOf(n)
		if pools[pool] {
			continue
		}
		reason := nodeRefuses(pod, affinity, n)
		if reason == "" {
			pools[pool] = true
			continue
		}
		if len(why) < 2 {
			why = append(why, "Node "+n.Name+": "+reason)
		}
	}
	if snap.HasKarpenter {
		reqs := podRequirements(spec)
		for i := range snap.NodePools {
			if pools[snap.NodePools[i].Name] {
				continue
			}
			reason := snap.NodePools[i].refuses(spec, reqs)
			if reason == "" {
				pools[snap.NodePools[i].Name] = true
				continue
			}
			if len(why) < 3 {
				why = append(why, "NodePool "+snap.NodePools[i].Name+": "+reason)
			}
		}
	}
	r := Result{Schedulable: len(pools) > 0 || snap.Truncated, Known: !snap.Truncated}
	for p := range pools {
		r.Pools = append(r.Pools, p)
	}
	sort.Strings(r.Pools)
	if len(r.Pools) > MaxPools {
		r.MorePools, r.Pools = len(r.Pools)-MaxPools, r.Pools[:MaxPools]
	}
	if !r.Schedulable {
		r.Reason = summary(snap, unmatched(spec, snap.Nodes), why)
	}
	return r
}

// Fits lists what in the snapshot takes the pod spec, by name and in the snapshot's order: the
// Nodes that fit it and, when the snapshot has Karpenter, the NodePools that could create one.
// It applies Check's predicates to every Node and NodePool, where Check looks at one Node of a
// pool it already knows fits no further, for `podpatch test`'s expect.fitsNodes and
// expect.fitsNodePools (reference §4).
func Fits(spec *corev1.PodSpec, snap *Snapshot) (nodes, nodePools []string) {
	if snap == nil || spec == nil {
		return nil, nil
	}
	pod := &corev1.Pod{Spec: *spec}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	for _, n := range snap.Nodes {
		if nodeRefuses(pod, affinity, n) == "" {
			nodes = append(nodes, n.Name)
		}
	}
	if snap.HasKarpenter {
		reqs := podRequirements(spec)
		for i := range snap.NodePools {
			if snap.NodePools[i].refuses(spec, reqs) == "" {
				nodePools = append(nodePools, snap.NodePools[i].Name)
			}
		}
	}
	return nodes, nodePools
}

// unmatched names the Pod's label requirements that no Node meets, each alone, by the
// scheduler's own predicate (at most 3; "" when each is met by some Node, or the Pod has
// several required terms, which are alternatives): "cloud.google.com/gke-spot=true", "key In
// [a b]". It says which requirement strands the Pod, not only that it is stranded.
func unmatched(spec *corev1.PodSpec, nodes []*corev1.Node) string {
	var reqs []corev1.NodeSelectorRequirement
	var names []string
	keys := make([]string, 0, len(spec.NodeSelector))
	for k := range spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		reqs = append(reqs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{spec.NodeSelector[k]}})
		names = append(names, k+"="+spec.NodeSelector[k])
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) > 1 {
			return ""
		}
		for _, t := range terms {
			for _, e := range t.MatchExpressions {
				reqs = append(reqs, e)
				names = append(names, strings.TrimSpace(fmt.Sprintf("%s %s %s", e.Key, e.Operator, strings.Join(e.Values, " "))))
			}
		}
	}
	var out []string
	for i, r := range reqs {
		alone := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{r}}}}
		met := slices.ContainsFunc(nodes, func(n *corev1.Node) bool {
			ok, err := corev1helpers.MatchNodeSelectorTerms(n, alone)
			return ok && err == nil
		})
		if !met && len(out) < 3 {
			out = append(out, names[i])
		}
	}
	return strings.Join(out, " or ")
}

// summary says what was looked at, the requirements no Node meets, and the first refusals.
func summary(snap *Snapshot, unmet string, why []string) string {
	what := fmt.Sprintf("no Node of %d fits", len(snap.Nodes))
	if unmet != "" && len(snap.Nodes) > 0 {
		what += ": none matches " + unmet
	}
	if snap.HasKarpenter {
		what += fmt.Sprintf(", no Karpenter NodePool of %d can create one", len(snap.NodePools))
	}
	if len(why) > 0 {
		what += " (" + strings.Join(why, "; ") + ")"
	}
	return what
}

// nodeRefuses says why a Node does not take the Pod ("" when it does): the scheduler's
// NodeAffinity (nodeSelector and required affinity) and TaintToleration filters, and
// spec.unschedulable (cordoned).
func nodeRefuses(pod *corev1.Pod, affinity nodeaffinity.RequiredNodeAffinity, n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	if ok, err := affinity.Match(n); err != nil {
		return "invalid node affinity: " + err.Error()
	} else if !ok {
		return "its labels do not match the nodeSelector or required node affinity"
	}
	noScheduleOrExecute := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, noScheduleOrExecute, true); untolerated {
		return "taint " + t.ToString() + " is not tolerated"
	}
	return ""
}

// Finding is the `unschedulable` finding (reference §8) for a Pod Check refuses, naming what
// made it so when known (the policy that set the placement fields, or "").
func Finding(r Result, policy string) checks.Finding {
	return checks.Finding{Check: checks.Unschedulable, Severity: checks.SeverityError, Policy: policy,
		Field: "spec", Message: "the Pod would be unschedulable: " + r.Reason,
		Fix: "make the policy's nodeSelector, required node affinity and tolerations match a Node or NodePool, or narrow its match to Pods that can run there"}
}

// Spec decodes what Check and Unmodelled read of a Pod's JSON: its nodeSelector, affinity,
// tolerations, topology spread constraints, volumes and priority class.
func Spec(pod []byte) (*corev1.PodSpec, error) {
	var v struct {
		Spec struct {
			NodeSelector              map[string]string                 `json:"nodeSelector"`
			Affinity                  *corev1.Affinity                  `json:"affinity"`
			Tolerations               []corev1.Toleration               `json:"tolerations"`
			TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
			Volumes                   []corev1.Volume                   `json:"volumes"`
			PriorityClassName         string                            `json:"priorityClassName"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(pod, &v); err != nil {
		return nil, err
	}
	s := v.Spec
	return &corev1.PodSpec{NodeSelector: s.NodeSelector, Affinity: s.Affinity, Tolerations: s.Tolerations,
		TopologySpreadConstraints: s.TopologySpreadConstraints, Volumes: s.Volumes, PriorityClassName: s.PriorityClassName}, nil
}

// The constraints of a Pod that Check does not evaluate (Unmodelled), named by their field.
const (
	UnmodelledTopologySpread  = "topologySpreadConstraints"
	UnmodelledPodAffinity     = "podAffinity"
	UnmodelledPodAntiAffinity = "podAntiAffinity"
	UnmodelledVolumes         = "volumes (persistentVolumeClaim)"
	UnmodelledPreemption      = "priorityClassName (preemption)"
)

// Unmodelled are the constraints of a pod spec that can change where the scheduler puts it
// but that Check does not evaluate, since they depend on the other Pods, the volumes or the
// free capacity of the cluster, which a snapshot does not hold: topology spread constraints
// that refuse (whenUnsatisfiable DoNotSchedule), required inter-pod affinity and
// anti-affinity, volumes bound to a topology (persistentVolumeClaim, ephemeral), and a
// priorityClassName (the scheduler may preempt Pods to place it; spec.priority alone is not
// listed: the API server sets it on every Pod). A pool Check names for such a Pod is
// one its modelled predicates allow, not one it is sure to get; a Pod Check refuses is refused
// whatever these say. Preferred (soft) terms only rank Nodes and are not listed.
func Unmodelled(spec *corev1.PodSpec) []string {
	if spec == nil {
		return nil
	}
	var out []string
	for _, c := range spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			out = append(out, UnmodelledTopologySpread)
			break
		}
	}
	if a := spec.Affinity; a != nil {
		if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			out = append(out, UnmodelledPodAffinity)
		}
		if a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			out = append(out, UnmodelledPodAntiAffinity)
		}
	}
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			out = append(out, UnmodelledVolumes)
			break
		}
	}
	if spec.PriorityClassName != "" {
		out = append(out, UnmodelledPreemption)
	}
	return out
}

// Responsible is the policy (its ref without @resourceVersion) of the last of changes to set a
// placement field (nodeSelector, affinity, tolerations), "" when none did.
func Responsible(changes []policies.Change) string {
	for i := len(changes) - 1; i >= 0; i-- {
		for _, f := range changes[i].Fields {
			for _, p := range []string{"spec.nodeSelector", "spec.affinity", "spec.tolerations"} {
				if strings.HasPrefix(f, p) {
					ref, _, _ := strings.Cut(changes[i].Policy.Ref, "@")
					return ref
				}
			}
		}
	}
	return ""
}

// placementKey is the part of a pod spec Check reads, as a string: Pods of one group share it,
// so a Cache answers them with one check.
func placementKey(spec *corev1.PodSpec) string {
	var b strings.Builder
	keys := make([]string, 0, len(spec.NodeSelector))
	for k := range spec.NodeSelector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + spec.NodeSelector[k] + "\x00")
	}
	b.WriteString("\x01")
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		b.WriteString(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.String())
	}
	b.WriteString("\x01")
	for _, t := range spec.Tolerations {
		b.WriteString(t.String() + "\x00")
	}
	return b.String()
}

// Cache remembers Check's verdicts by the placement fields of the pod spec, so that previewing
// thousands of Pods of a few shapes costs a few checks. At most MaxCached verdicts are kept.
type Cache struct {
	Snapshot *Snapshot
	verdicts map[string]Result
}

// MaxCached bounds a Cache; when full it starts over.
const MaxCached = 4096

// Check is Check through the cache.
func (c *Cache) Check(spec *corev1.PodSpec) Result {
	if c == nil {
		return Result{Schedulable: true}
	}
	k := placementKey(spec)
	if r, ok := c.verdicts[k]; ok {
		return r
	}
	if c.verdicts == nil || len(c.verdicts) >= MaxCached {
		c.verdicts = map[string]Result{}
	}
	r := Check(spec, c.Snapshot)
	c.verdicts[k] = r
	return r
}
