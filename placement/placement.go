// Package placement is the `unschedulable` check of reference §8: whether a Pod's
// nodeSelector, required node affinity, tolerations and resource requests leave it a place to
// run — a Node of the cluster, or a Karpenter NodePool or a GKE ComputeClass that could create
// one — so that
// `podpatch diff` (reference §10), `explain` and `lint --objects` can say when a policy change
// strands Pods before it is pushed.
//
// Nodes are matched with the scheduler's own predicates (k8s.io/component-helpers), in its
// filter order (nodeRefuses); NodePools
// with Karpenter's compatibility rules (requirements.go), read from their documented schema
// through the dynamic client, so that no cloud provider's module is a dependency.
package placement

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	resourcehelper "k8s.io/component-helpers/resource"
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
	req := requests(pod)
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
		reason := nodeRefuses(pod, affinity, req, n)
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
		r.Reason = summary(snap, unmatched(spec, snap.Nodes), unheld(req, snap.Nodes), why)
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
	req := requests(pod)
	for _, n := range snap.Nodes {
		if nodeRefuses(pod, affinity, req, n) == "" {
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

// unheld names the Pod's requests that no Node's allocatable holds, each alone, whatever the
// Node's labels and taints (at most 3, "" when each fits some Node): "nvidia.com/gpu 8". As
// unmatched, it says which request strands the Pod.
func unheld(req corev1.ResourceList, nodes []*corev1.Node) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(req)) {
		alone := corev1.ResourceList{name: req[name]}
		if !slices.ContainsFunc(nodes, func(n *corev1.Node) bool { return len(insufficient(alone, n)) == 0 }) && len(out) < 3 {
			q := req[name]
			out = append(out, string(name)+" "+q.String())
		}
	}
	return strings.Join(out, " or ")
}

// summary says what was looked at, the label requirements no Node meets (unmet), the requests
// no Node's allocatable holds (unheld), and the first refusals.
func summary(snap *Snapshot, unmet, unheld string, why []string) string {
	what := fmt.Sprintf("no Node of %d fits", len(snap.Nodes))
	if unmet != "" && len(snap.Nodes) > 0 {
		what += ": none matches " + unmet
	}
	if unheld != "" && len(snap.Nodes) > 0 {
		what += ": none has the allocatable for " + unheld
	}
	if snap.HasKarpenter {
		what += fmt.Sprintf(", no Karpenter NodePool of %d can create one", len(snap.NodePools))
	}
	if len(why) > 0 {
		what += " (" + strings.Join(why, "; ") + ")"
	}
	return what
}

// nodeRefuses says why a Node does not take the Pod ("" when it does), by the scheduler's
// filters in its order, so that a Node refused for several reasons is refused for the one the
// scheduler names: NodeUnschedulable (cordoned, unless the Pod tolerates the unschedulable
// taint), TaintToleration, NodeAffinity (nodeSelector and required affinity), NodeResourcesFit
// (requests against the Node's allocatable, as if the Node were empty: insufficient).
func nodeRefuses(pod *corev1.Pod, affinity nodeaffinity.RequiredNodeAffinity, req corev1.ResourceList, n *corev1.Node) string {
	if n.Spec.Unschedulable && !slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool {
		return t.ToleratesTaint(klog.Background(), &unschedulableTaint, true)
	}) {
		return "cordoned"
	}
	noScheduleOrExecute := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, noScheduleOrExecute, true); untolerated {
		return "taint " + t.ToString() + " is not tolerated"
	}
	if ok, err := affinity.Match(n); err != nil {
		return "invalid node affinity: " + err.Error()
	} else if !ok {
		return "its labels do not match the nodeSelector or required node affinity"
	}
	if short := insufficient(req, n); len(short) > 0 {
		return strings.Join(short, ", ")
	}
	return ""
}

// unschedulableTaint is the taint a cordoned Node stands for: a Pod that tolerates it may still
// be placed there (the scheduler's NodeUnschedulable filter).
var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// requests is what the scheduler's NodeResourcesFit filter asks of a Node for the Pod: its
// containers' requests, the largest of its init containers' (sidecars added), or its pod-level
// requests where set, plus its overhead (k8s.io/component-helpers/resource, the scheduler's
// own function). Requests of zero are dropped.
func requests(pod *corev1.Pod) corev1.ResourceList {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	for name, q := range req {
		if q.IsZero() || !fitted(name) {
			delete(req, name)
		}
	}
	return req
}

// fitted says whether NodeResourcesFit compares a resource with allocatable: cpu, memory,
// ephemeral-storage, huge pages, and names with a domain (extended resources such as
// nvidia.com/gpu, and kubernetes.io/-prefixed ones).
func fitted(name corev1.ResourceName) bool {
	switch {
	case name == corev1.ResourceCPU, name == corev1.ResourceMemory, name == corev1.ResourceEphemeralStorage:
		return true
	case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix), strings.Contains(string(name), "/"):
		return true
	}
	return false
}

// insufficient lists what a Node, empty, cannot hold of the Pod's requests, in the scheduler's
// words ("Insufficient cpu (requests 64 > allocatable 32)", "Too many pods"). A Node that reports
// no allocatable (one written by hand for `podpatch test` or `diff --nodes`) holds anything: its
// size is unknown, not zero. Other Pods' requests are not counted: a snapshot does not hold
// them, and an autoscaler adds room; a request larger than an empty Node is never met there.
func insufficient(req corev1.ResourceList, n *corev1.Node) []string {
	alloc := n.Status.Allocatable
	if len(alloc) == 0 {
		return nil
	}
	var out []string
	if pods := alloc[corev1.ResourcePods]; pods.Value() < 1 {
		out = append(out, "Too many pods (allocatable pods "+pods.String()+")")
	}
	for _, name := range slices.Sorted(maps.Keys(req)) {
		want, have := req[name], alloc[name]
		over := want.Value() > have.Value()
		if name == corev1.ResourceCPU {
			over = want.MilliValue() > have.MilliValue()
		}
		if over {
			out = append(out, fmt.Sprintf("Insufficient %s (requests %s > allocatable %s)", name, want.String(), have.String()))
		}
	}
	return out
}

// Finding is the `unschedulable` finding (reference §8) for a Pod Check refuses, naming what
// made it so when known (the policy that set the placement fields, or "").
func Finding(r Result, policy string) checks.Finding {
	return checks.Finding{Check: checks.Unschedulable, Severity: checks.SeverityError, Policy: policy,
		Field: "spec", Message: "the Pod would be unschedulable: " + r.Reason,
		Fix: "make the policy's nodeSelector, required node affinity and tolerations match a Node or NodePool, or narrow its match to Pods that can run there"}
}

// Spec decodes what Check and Unmodelled read of a Pod's JSON: its nodeSelector, affinity,
// tolerations, topology spread constraints, volumes, priority class, and what its requests
// are made of (its containers' and init containers' resources and restart policies, its
// pod-level resources and overhead).
func Spec(pod []byte) (*corev1.PodSpec, error) {
	type container struct {
		Name          string                         `json:"name"`
		Resources     corev1.ResourceRequirements    `json:"resources"`
		RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`
	}
	var v struct {
		Spec struct {
			NodeSelector              map[string]string                 `json:"nodeSelector"`
			Affinity                  *corev1.Affinity                  `json:"affinity"`
			Tolerations               []corev1.Toleration               `json:"tolerations"`
			TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
			Volumes                   []corev1.Volume                   `json:"volumes"`
			PriorityClassName         string                            `json:"priorityClassName"`
			Containers                []container                       `json:"containers"`
			InitContainers            []container                       `json:"initContainers"`
			Resources                 *corev1.ResourceRequirements      `json:"resources"`
			Overhead                  corev1.ResourceList               `json:"overhead"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(pod, &v); err != nil {
		return nil, err
	}
	s := v.Spec
	out := &corev1.PodSpec{NodeSelector: s.NodeSelector, Affinity: s.Affinity, Tolerations: s.Tolerations,
		TopologySpreadConstraints: s.TopologySpreadConstraints, Volumes: s.Volumes, PriorityClassName: s.PriorityClassName,
		Resources: s.Resources, Overhead: s.Overhead}
	for _, c := range s.Containers {
		out.Containers = append(out.Containers, corev1.Container{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range s.InitContainers {
		out.InitContainers = append(out.InitContainers, corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy})
	}
	return out, nil
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
// but that Check does not evaluate, since they depend on the other Pods or the volumes of the
// cluster, which a snapshot does not hold: topology spread constraints
// that refuse (whenUnsatisfiable DoNotSchedule), required inter-pod affinity and
// anti-affinity, volumes bound to a topology (persistentVolumeClaim, ephemeral), and a
// priorityClassName (the scheduler may preempt Pods to place it; spec.priority alone is not
// listed: the API server sets it on every Pod). A pool Check names for such a Pod is
// one its modelled predicates allow, not one it is sure to get; a Pod Check refuses is refused
// whatever these say. Preferred (soft) terms only rank Nodes and are not listed. Nor is free
// capacity, which every Pod with requests depends on: Check holds requests against an empty
// Node's allocatable, so a Pod it places may still wait for room (or for an autoscaler's Node),
// and one it refuses for its requests never fits that pool.
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
// field Check reads (nodeSelector, affinity, tolerations, requests: a container's, an init
// container's or the Pod's resources, its overhead), "" when none did.
func Responsible(changes []policies.Change) string {
	for i := len(changes) - 1; i >= 0; i-- {
		for _, f := range changes[i].Fields {
			if placementField(f) {
				ref, _, _ := strings.Cut(changes[i].Policy.Ref, "@")
				return ref
			}
		}
	}
	return ""
}

// placementField says whether a changed field's path (policies.Change.Fields) is one Check reads.
func placementField(f string) bool {
	for _, p := range []string{"spec.nodeSelector", "spec.affinity", "spec.tolerations", "spec.resources", "spec.overhead"} {
		if strings.HasPrefix(f, p) {
			return true
		}
	}
	for _, p := range []string{"spec.containers[", "spec.initContainers["} {
		if strings.HasPrefix(f, p) && strings.Contains(f, "].resources") {
			return true
		}
	}
	return false
}

// placementKey is the part of a pod spec Check reads (its requests as NodeResourcesFit sums
// them), as a string: Pods of one group share it,
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
	b.WriteString("\x01")
	req := requests(&corev1.Pod{Spec: *spec})
	for _, name := range slices.Sorted(maps.Keys(req)) {
		q := req[name]
		b.WriteString(string(name) + "=" + q.String() + "\x00")
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
