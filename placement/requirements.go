package placement

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// NodePoolLabel is the label Karpenter gives every Node of a NodePool: its name.
const NodePoolLabel = "karpenter.sh/nodepool"

// wellKnownLabels are the labels Karpenter sets on the Nodes it creates from the offerings of
// the cloud provider (sigs.k8s.io/karpenter pkg/apis/v1 WellKnownLabels): a Pod may require
// them of a NodePool that does not constrain them.
var wellKnownLabels = map[string]bool{
	NodePoolLabel:                  true,
	corev1.LabelTopologyZone:       true,
	corev1.LabelTopologyRegion:     true,
	corev1.LabelInstanceTypeStable: true,
	corev1.LabelArchStable:         true,
	corev1.LabelOSStable:           true,
	"karpenter.sh/capacity-type":   true,
	corev1.LabelWindowsBuild:       true,
}

// wellKnownPrefixes are the cloud providers' own well-known labels (instance family, size, …).
var wellKnownPrefixes = []string{"karpenter.k8s.aws/", "karpenter.azure.com/", "karpenter.k8s.gcp/"}

func wellKnown(key string) bool {
	if wellKnownLabels[key] {
		return true
	}
	for _, p := range wellKnownPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// values is what a requirement allows for one key: the values listed, or every value but
// those (complement), within integer bounds (Gt, Lt). absentOK says a Node without the label
// satisfies it too (NotIn, DoesNotExist).
type values struct {
	set        map[string]bool
	complement bool
	gt, lt     *int64
	absentOK   bool
	minValues  *int
}

// valuesOf reads a node selector requirement.
func valuesOf(op corev1.NodeSelectorOperator, vs []string) (values, error) {
	v := values{set: make(map[string]bool, len(vs))}
	for _, s := range vs {
		v.set[s] = true
	}
	switch op {
	case corev1.NodeSelectorOpIn:
	case corev1.NodeSelectorOpNotIn:
		v.complement, v.absentOK = true, true
	case corev1.NodeSelectorOpExists:
		v.complement, v.set = true, map[string]bool{}
	case corev1.NodeSelectorOpDoesNotExist:
		v.set, v.absentOK = map[string]bool{}, true
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(vs) != 1 {
			return v, fmt.Errorf("%s takes one value", op)
		}
		n, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil {
			return v, fmt.Errorf("%s %q: not an integer", op, vs[0])
		}
		v.complement, v.set = true, map[string]bool{}
		if op == corev1.NodeSelectorOpGt {
			v.gt = &n
		} else {
			v.lt = &n
		}
	default:
		return v, fmt.Errorf("unknown operator %q", op)
	}
	return v, nil
}

// within says whether a value lies within the bounds.
func (v values) within(s string, gt, lt *int64) bool {
	if gt == nil && lt == nil {
		return true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && (gt == nil || n > *gt) && (lt == nil || n < *lt)
}

// intersect is what both allow.
func (v values) intersect(o values) values {
	out := values{complement: v.complement && o.complement, gt: v.gt, lt: v.lt, absentOK: v.absentOK && o.absentOK, minValues: v.minValues}
	if o.gt != nil && (out.gt == nil || *o.gt > *out.gt) {
		out.gt = o.gt
	}
	if o.lt != nil && (out.lt == nil || *o.lt < *out.lt) {
		out.lt = o.lt
	}
	if o.minValues != nil && (out.minValues == nil || *o.minValues > *out.minValues) {
		out.minValues = o.minValues
	}
	out.set = map[string]bool{}
	switch {
	case v.complement && o.complement:
		for s := range v.set {
			out.set[s] = true
		}
		for s := range o.set {
			out.set[s] = true
		}
		return out
	case v.complement:
		v, o = o, v
	}
	for s := range v.set {
		if (o.complement != o.set[s]) && v.within(s, out.gt, out.lt) {
			out.set[s] = true
		}
	}
	out.gt, out.lt = nil, nil // a finite set: the bounds are applied
	return out
}

// empty says no value is allowed (a Node must lack the label).
func (v values) empty() bool {
	if v.gt != nil && v.lt != nil && *v.gt+1 >= *v.lt {
		return true
	}
	return !v.complement && len(v.set) == 0
}

// requirements are, per key, what a Pod's term or a NodePool allows.
type requirements map[string]values

func (r requirements) add(key string, v values) {
	if have, ok := r[key]; ok {
		v = have.intersect(v)
	}
	r[key] = v
}

// podRequirements are a Pod's alternatives (its required node affinity's terms, ORed), each
// with its nodeSelector; a term that cannot be read is left out (the scheduler refuses it too).
func podRequirements(spec *corev1.PodSpec) []requirements {
	base := requirements{}
	for k, s := range spec.NodeSelector {
		v, _ := valuesOf(corev1.NodeSelectorOpIn, []string{s})
		base.add(k, v)
	}
	var terms []corev1.NodeSelectorTerm
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) == 0 {
		return []requirements{base}
	}
	var out []requirements
terms:
	for _, t := range terms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue // an empty term matches no Node (the scheduler's rule)
		}
		r := make(requirements, len(base)+len(t.MatchExpressions))
		for k, v := range base {
			r[k] = v
		}
		for _, e := range t.MatchExpressions {
			v, err := valuesOf(e.Operator, e.Values)
			if err != nil {
				continue terms
			}
			r.add(e.Key, v)
		}
		// matchFields (metadata.name) name existing Nodes: a Node Karpenter creates has a new
		// name, so such a term is met by no NodePool.
		if len(t.MatchFields) > 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

// requirements are what a NodePool's Nodes can be: its requirements, its template labels,
// and its own name label.
func (p *NodePool) requirements() (requirements, error) {
	r := requirements{}
	for _, q := range p.Requirements {
		v, err := valuesOf(q.Operator, q.Values)
		if err != nil {
			return nil, fmt.Errorf("requirement %s: %w", q.Key, err)
		}
		v.minValues = q.MinValues
		r.add(q.Key, v)
	}
	for k, s := range p.Labels {
		v, _ := valuesOf(corev1.NodeSelectorOpIn, []string{s})
		r.add(k, v)
	}
	v, _ := valuesOf(corev1.NodeSelectorOpIn, []string{p.Name})
	r.add(NodePoolLabel, v)
	return r, nil
}

// refuses says why the NodePool cannot create a Node for the Pod ("" when it can): a taint
// the Pod does not tolerate, or no alternative of the Pod's compatible with the pool's
// requirements, as Karpenter decides it (sigs.k8s.io/karpenter pkg/scheduling: a key the pool
// does not define is allowed only if Karpenter sets it, or the Pod requires its absence;
// defined keys must intersect; minValues must stay reachable).
func (p *NodePool) refuses(spec *corev1.PodSpec, alternatives []requirements) string {
	noScheduleOrExecute := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), p.Taints, spec.Tolerations, noScheduleOrExecute, true); untolerated {
		return "taint " + t.ToString() + " is not tolerated"
	}
	pool, err := p.requirements()
	if err != nil {
		return err.Error()
	}
	if len(alternatives) == 0 {
		return "no node affinity term a new Node could meet"
	}
	var first string
	for _, alt := range alternatives {
		reason := compatible(pool, alt)
		if reason == "" {
			return ""
		}
		if first == "" {
			first = reason
		}
	}
	return first
}

// compatible says why a Pod's alternative cannot be met by a pool's Nodes ("" when it can).
func compatible(pool, pod requirements) string {
	for key, want := range pod {
		have, defined := pool[key]
		if !defined {
			if wellKnown(key) || want.absentOK {
				continue
			}
			return fmt.Sprintf("label %q is not one the NodePool sets", key)
		}
		both := have.intersect(want)
		if both.empty() {
			if want.absentOK && have.absentOK {
				continue
			}
			return fmt.Sprintf("label %q: no value both the Pod and the NodePool allow", key)
		}
		if have.minValues != nil && !both.complement && len(both.set) < *have.minValues {
			return fmt.Sprintf("label %q: %d value(s) left, the NodePool's minValues is %d", key, len(both.set), *have.minValues)
		}
	}
	return ""
}
