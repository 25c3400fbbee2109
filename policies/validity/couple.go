package validity

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/k8sfields"
)

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

// Couple applies the coupled-field rules to a patched Pod whose spec carried before (the values
// of the coupled fields as given), and returns what it changed, for --explain. sets reports
// whether an applied policy sets (not removes) a member of the pod spec: such a member stays.
func Couple(t *jsontree.Tree, obj map[string]any, before *CoupledValues, sets func(member string) bool, cluster Lookups) []string {
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
			if _, present := spec[r]; !present || sets(r) {
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
		if old, present := jsontree.Expand(spec["serviceAccount"]).(string); present && old != now && !sets("serviceAccount") {
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
func computed(spec map[string]any, from, class string, cluster Lookups) []string {
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

// couplingFields are the spec members Couple compares with the object as given.
var couplingFields = [...]string{"priorityClassName", "runtimeClassName", "serviceAccountName"}

// CoupledValues are the values of the coupled fields of a Pod as given, read before the policies
// apply and compared by Couple after.
type CoupledValues [len(couplingFields)]string

// Read records the values of the coupled fields of a Pod.
func (v *CoupledValues) Read(t *jsontree.Tree, obj map[string]any) {
	for i, k := range couplingFields {
		v[i] = specString(t, obj, k)
	}
}

func (v *CoupledValues) of(field string) string {
	for i, k := range couplingFields {
		if k == field {
			return v[i]
		}
	}
	return ""
}

// EqualizeNonOvercommittable is the coupled-field rule of resources that cannot be overcommitted
// (extended resources such as nvidia.com/gpu, huge pages): their request must equal their limit,
// and lint keeps a policy from setting the request alone, so a patched container whose request
// differs from its limit had its limit changed by a policy: the request follows it (and goes
// with a limit a policy removed). The API server defaults only a missing request, so without
// this a policy changing the GPU limit of a Pod that requests GPUs would get it refused. It runs
// only when the check found such a mismatch (RuleExtendedResourceLimit), and returns what it
// changed.
func EqualizeNonOvercommittable(t *jsontree.Tree, obj map[string]any) []string {
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
				if k8sfields.ResourceOvercommitAllowed(name) {
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

// ServiceType is a Service's spec.type, ClusterIP when it has none (the API server's default).
func ServiceType(t *jsontree.Tree, obj map[string]any) string {
	if s := specString(t, obj, "type"); s != "" {
		return s
	}
	return string(corev1.ServiceTypeClusterIP)
}

// CoupleService is the coupled-field rule of a Service whose type the policies changed (reference
// §8): the fields that only the type it came with may have are removed, unless a policy sets
// them, and it returns what it removed. The API server defaults externalTrafficPolicy and
// allocateLoadBalancerNodePorts on a LoadBalancer or NodePort Service before podpatch sees it, so
// without this an enforce policy making such a Service ClusterIP would make it invalid, and be
// left out: the Service would escape the enforced type. given is the type the Service came with (ServiceType).
func CoupleService(t *jsontree.Tree, obj map[string]any, given string, sets func(member string) bool) []string {
	spec, ok := t.GetMap(obj, "spec")
	if !ok {
		return nil
	}
	now := ServiceType(t, obj)
	if now == given {
		return nil
	}
	why := "the policies made the " + given + " Service " + now
	var adjusted []string
	remove := func(k string) {
		if _, present := spec[k]; !present || sets(k) {
			return
		}
		delete(spec, k)
		adjusted = append(adjusted, "spec."+k+" removed: "+why)
	}
	lb := now == string(corev1.ServiceTypeLoadBalancer)
	nodePorts := lb || now == string(corev1.ServiceTypeNodePort)
	if !lb {
		for _, k := range []string{"loadBalancerClass", "allocateLoadBalancerNodePorts", "loadBalancerSourceRanges", "healthCheckNodePort"} {
			remove(k)
		}
	}
	if nodePorts {
		return adjusted
	}
	externalIPs, _ := t.Get(spec, "externalIPs")
	if ips, _ := externalIPs.([]any); now != string(corev1.ServiceTypeClusterIP) || len(ips) == 0 {
		remove("externalTrafficPolicy") // only an externally reachable Service has one
	}
	if now != string(corev1.ServiceTypeClusterIP) || sets("ports") {
		return adjusted
	}
	portsV, _ := t.Get(spec, "ports")
	ports, _ := portsV.([]any)
	removed := false
	for i := range ports {
		if p, ok := t.At(ports, i).(map[string]any); ok {
			if _, present := p["nodePort"]; present {
				delete(p, "nodePort")
				removed = true
			}
		}
	}
	if removed {
		adjusted = append(adjusted, "spec.ports[*].nodePort removed: "+why)
	}
	return adjusted
}
