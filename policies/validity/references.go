package validity

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// The rules of a patched Pod's references to cluster objects (reference §8): the PriorityClass,
// RuntimeClass and ServiceAccount it names, read through Cluster.

// priority: the Priority plugin finds the class and refuses a priority or preemption policy
// that differs from the class's.
func (c *checker) priority(spec map[string]any) {
	name := strOf(spec["priorityClassName"])
	info, p := c.env.Lookups.PriorityClass(name)
	switch {
	case p == Unknown:
		return
	case p == Absent && name != "":
		c.add(RulePriorityClassNotFound, "spec.priorityClassName", "no PriorityClass "+strconv.Quote(name)+" exists")
		return
	case p == Absent:
		info = PriorityClassInfo{} // no global default: priority 0
	}
	if v, ok := numOf(spec["priority"]); ok && v != int64(info.Value) {
		c.add(RulePriorityMismatch, "spec.priority", "must not differ from the value "+strconv.Itoa(int(info.Value))+" of its PriorityClass")
	}
	want := info.PreemptionPolicy
	if want == "" {
		want = string(corev1.PreemptLowerPriority)
	}
	if pp := strOf(spec["preemptionPolicy"]); pp != "" && pp != want {
		c.add(RulePriorityMismatch, "spec.preemptionPolicy", "must not differ from "+want+", its PriorityClass's")
	}
}

// runtimeClass: the RuntimeClass plugin finds the class, refuses an overhead other than the
// class's, and merges the class's node selector into the Pod's.
func (c *checker) runtimeClass(spec map[string]any) {
	name := strOf(spec["runtimeClassName"])
	overhead := mapOf(spec["overhead"])
	if name == "" {
		if len(overhead) > 0 {
			c.add(RuleOverheadMismatch, "spec.overhead", "may be set only by the RuntimeClass admission plugin, from a RuntimeClass with an overhead")
		}
		return
	}
	if c.env.Lookups == nil {
		return
	}
	info, p := c.env.Lookups.RuntimeClass(name)
	switch p {
	case Unknown:
		return
	case Absent:
		c.add(RuleRuntimeClassNotFound, "spec.runtimeClassName", "no RuntimeClass "+strconv.Quote(name)+" exists")
		return
	}
	if len(overhead) > 0 && !sameResources(overhead, info.Overhead) {
		c.add(RuleOverheadMismatch, "spec.overhead", "must equal the overhead of RuntimeClass "+strconv.Quote(name))
	}
	ns := mapOf(spec["nodeSelector"])
	for k, v := range info.NodeSelector {
		if got, ok := ns[k]; ok && strOf(got) != v {
			c.add(RuleRuntimeClassScheduling, item("spec.nodeSelector", k), "conflicts with RuntimeClass "+strconv.Quote(name)+"'s node selector "+k+"="+v)
		}
	}
}

func sameResources(m map[string]any, want corev1.ResourceList) bool {
	if len(m) != len(want) {
		return false
	}
	for k, v := range m {
		q, ok := quantityOf(v)
		w, has := want[corev1.ResourceName(k)]
		if !ok || !has || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// serviceAccount: the ServiceAccount plugin refuses a Pod whose account does not exist.
func (c *checker) serviceAccount(spec map[string]any) {
	name, fld := strOf(spec["serviceAccountName"]), "spec.serviceAccountName"
	if name == "" {
		// The API server reads the deprecated spec.serviceAccount when serviceAccountName is
		// empty (the v1 conversion), and the plugin then looks that account up.
		name, fld = strOf(spec["serviceAccount"]), "spec.serviceAccount"
	}
	if name == "" {
		return
	}
	if c.env.Lookups.ServiceAccount(c.env.Namespace, name) == Absent {
		c.add(RuleServiceAccountNotFound, fld, "no ServiceAccount "+strconv.Quote(name)+" exists in namespace "+c.env.Namespace)
	}
}
