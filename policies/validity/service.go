package validity

import (
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// The rules of a patched Service (reference §8): the fields that hold only for some types, and its ports.

// service checks a Service: the fields that hold only for some types, and its ports.
func (c *checker) service(obj map[string]any) {
	spec := mapOf(obj["spec"])
	if spec == nil {
		return
	}
	typ := strOf(spec["type"])
	if typ == "" {
		typ = string(corev1.ServiceTypeClusterIP)
	}
	headless := strOf(spec["clusterIP"]) == corev1.ClusterIPNone
	c.clusterIPs(spec)
	c.serviceTypeFields(obj, spec, typ, headless)
	c.ipFamilies(spec) // families.go
	// sessionAffinityConfig with sessionAffinity None is no violation: defaulting drops it.
	c.servicePorts(spec, typ, headless)
}

// clusterIPs checks spec.clusterIPs: addresses, None alone and first, and clusterIP as the first
// entry.
func (c *checker) clusterIPs(spec map[string]any) {
	ips := listOf(spec["clusterIPs"])
	for i, x := range ips {
		ip := strOf(x)
		switch _, err := netip.ParseAddr(ip); {
		case ip == corev1.ClusterIPNone && len(ips) > 1:
			if i == 0 || strOf(ips[0]) != corev1.ClusterIPNone {
				c.own(RuleServiceClusterIPs, "spec.clusterIPs", "'None' must be the first and only value",
					func() string { return "spec.clusterIPs" })
			}
		case ip != corev1.ClusterIPNone && err != nil:
			c.add(RuleServiceClusterIPs, "spec.clusterIPs["+strconv.Itoa(i)+"]", "must be a valid IP address or None")
		}
	}
	if len(ips) > 0 {
		switch ip := strOf(spec["clusterIP"]); {
		case ip == "":
			c.add(RuleServiceClusterIPs, "spec.clusterIPs", "must be empty when clusterIP is not set")
		case strOf(ips[0]) != ip:
			c.add(RuleServiceClusterIPs, "spec.clusterIPs", "the first must be clusterIP, "+ip)
		}
	}
}

// serviceTypeFields checks what the Service's type (typ, defaulted) allows: no headless
// NodePort or LoadBalancer, an ExternalName Service's name and no cluster IP, and the fields
// that hold only for externally reachable or LoadBalancer Services.
func (c *checker) serviceTypeFields(obj, spec map[string]any, typ string, headless bool) {
	lb := typ == string(corev1.ServiceTypeLoadBalancer)
	nodePorts := lb || typ == string(corev1.ServiceTypeNodePort)
	only := func(k, what string) {
		if v, ok := spec[k]; ok && v != nil {
			c.add(RuleServiceTypeField, "spec."+k, "may be set only "+what+", not for type "+typ)
		}
	}
	if headless && nodePorts {
		c.add(RuleServiceHeadlessExternal, "spec.clusterIP", "may not be None for a "+typ+" Service")
	}
	if typ == string(corev1.ServiceTypeExternalName) {
		if strOf(spec["externalName"]) == "" {
			c.add(RuleServiceExternalName, "spec.externalName", "an ExternalName Service needs the DNS name it points to")
		}
		if strOf(spec["clusterIP"]) != "" {
			c.add(RuleServiceExternalName, "spec.clusterIP", "may not be set for an ExternalName Service")
		}
	}
	clusterIP := typ == string(corev1.ServiceTypeClusterIP)
	if !nodePorts && (!clusterIP || len(listOf(spec["externalIPs"])) == 0) {
		only("externalTrafficPolicy", "for an externally reachable Service (NodePort, LoadBalancer, or ClusterIP with externalIPs)")
	}
	if hc, _ := numOf(spec["healthCheckNodePort"]); hc != 0 && (!lb || strOf(spec["externalTrafficPolicy"]) != string(corev1.ServiceExternalTrafficPolicyLocal)) {
		c.add(RuleServiceTypeField, "spec.healthCheckNodePort", "may be set only with type LoadBalancer and externalTrafficPolicy Local")
	}
	if !lb {
		if len(listOf(spec["loadBalancerSourceRanges"])) > 0 {
			c.add(RuleServiceTypeField, "spec.loadBalancerSourceRanges", "may be set only for type LoadBalancer, not "+typ)
		}
		only("loadBalancerClass", "for type LoadBalancer")
		only("allocateLoadBalancerNodePorts", "for type LoadBalancer")
		if _, ok := mapOf(mapOf(obj["metadata"])["annotations"])[corev1.AnnotationLoadBalancerSourceRangesKey]; ok {
			c.add(RuleServiceTypeField, "metadata.annotations["+corev1.AnnotationLoadBalancerSourceRangesKey+"]", "may be set only for type LoadBalancer, not "+typ)
		}
	}
}

// servicePorts checks the Service's ports: at least one unless it needs none (ExternalName,
// headless), a name on each of several and no name, port or node port twice, and no node port
// on a ClusterIP Service.
func (c *checker) servicePorts(spec map[string]any, typ string, headless bool) {
	clusterIP := typ == string(corev1.ServiceTypeClusterIP)
	ports := listOf(spec["ports"])
	if len(ports) == 0 && typ != string(corev1.ServiceTypeExternalName) && !headless {
		c.add(RuleServicePortsRequired, "spec.ports", "a "+typ+" Service needs at least one port")
	}
	names := map[string]bool{}
	keys := map[string]bool{}
	nodes := map[string]bool{}
	for _, it := range ports {
		pm := mapOf(it)
		port, _ := numOf(pm["port"])
		proto := strOf(pm["protocol"])
		if proto == "" {
			proto = "TCP"
		}
		key := strconv.FormatInt(port, 10) + "/" + proto
		path := item("spec.ports", key)
		name := strOf(pm["name"])
		switch {
		case name == "" && len(ports) > 1:
			c.add(RuleServicePortName, path, "every port of a Service with several ports needs a name")
		case name != "" && names[name]:
			c.add(RuleServicePortName, path, "port name "+strconv.Quote(name)+" is used twice")
		}
		names[name] = true
		if keys[key] {
			c.add(RuleServiceDuplicatePort, path, "port "+key+" is used twice")
		}
		keys[key] = true
		if np, _ := numOf(pm["nodePort"]); np != 0 {
			if clusterIP {
				c.add(RuleServiceTypeField, path+".nodePort", "may not be set for type ClusterIP")
			}
			nk := strconv.FormatInt(np, 10) + "/" + proto
			if nodes[nk] {
				c.add(RuleServiceDuplicatePort, path+".nodePort", "node port "+nk+" is used twice")
			}
			nodes[nk] = true
		}
	}
}
