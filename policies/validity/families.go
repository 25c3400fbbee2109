package validity

import (
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// maxFamilyEntries bounds the ipFamilies and clusterIPs entries the rule reads: the API server
// accepts at most two of each, and refuses longer lists for a reason of their own.
const maxFamilyEntries = 4

// ipFamilies checks a Service's ipFamilyPolicy, ipFamilies and clusterIPs as the API server's
// allocation step does when it creates the Service.
func (c *checker) ipFamilies(spec map[string]any) {
	if strOf(spec["type"]) == string(corev1.ServiceTypeExternalName) {
		// No cluster IP: validation refuses any IP family field on it.
		for _, k := range []string{"ipFamilies", "ipFamilyPolicy"} {
			if spec[k] != nil {
				c.add(RuleServiceIPFamilies, "spec."+k, "may not be set for ExternalName services")
			}
		}
		return
	}
	families := make([]string, 0, 2)
	for _, f := range boundedList(spec["ipFamilies"]) {
		families = append(families, strOf(f))
	}
	ips := make([]string, 0, 2)
	for _, ip := range boundedList(spec["clusterIPs"]) {
		ips = append(ips, strOf(ip))
	}
	if len(ips) == 0 && strOf(spec["clusterIP"]) != "" {
		ips = append(ips, strOf(spec["clusterIP"])) // the create strategy fills clusterIPs so
	}
	headless := strOf(spec["clusterIP"]) == corev1.ClusterIPNone
	selectorless := len(mapOf(spec["selector"])) == 0
	policy := familyPolicy(spec, headless && selectorless)
	before := len(c.out)
	if policy == string(corev1.IPFamilyPolicySingleStack) {
		// Whatever the cluster serves.
		if len(ips) == 2 {
			c.add(RuleServiceIPFamilies, "spec.ipFamilyPolicy", "must be RequireDualStack or PreferDualStack when two cluster IPs are set")
		}
		if len(families) == 2 {
			c.own(RuleServiceIPFamilies, "spec.ipFamilyPolicy", "must be RequireDualStack or PreferDualStack when two IP families are set",
				func() string { return "spec.ipFamilyPolicy" })
		}
	}
	if c.env.Lookups == nil {
		return
	}
	configured, ok := c.env.Lookups.ServiceIPFamilies()
	if !ok || len(configured) == 0 {
		return // unknown: no verdict
	}
	families = c.inferredFamilies(ips, families, configured)
	if len(c.out) > before {
		return // the API server stops at these
	}
	if headless && selectorless {
		return // a headless Service without a selector may name any family
	}
	c.servedFamilies(policy, families, configured)
}

// familyPolicy is the Service's ipFamilyPolicy, defaulted as on create when missing:
// RequireDualStack for a headless Service without a selector (headlessSelectorless),
// SingleStack for any other.
func familyPolicy(spec map[string]any, headlessSelectorless bool) string {
	policy := strOf(spec["ipFamilyPolicy"])
	if policy == "" {
		policy = string(corev1.IPFamilyPolicySingleStack)
		if headlessSelectorless {
			policy = string(corev1.IPFamilyPolicyRequireDualStack)
		}
	}
	return policy
}

// inferredFamilies checks the families of the cluster IPs beyond those ipFamilies lists,
// inferred from the IPs, against those the cluster serves (configured), and returns families
// with those served appended.
func (c *checker) inferredFamilies(ips, families []string, configured []corev1.IPFamily) []string {
	for i, ip := range ips {
		if ip == corev1.ClusterIPNone {
			break
		}
		if i < len(families) {
			continue
		}
		fam, ok := ipFamilyOf(ip)
		if !ok {
			break // not an IP: refused by validation, for a reason of its own
		}
		if !slices.Contains(configured, corev1.IPFamily(fam)) {
			c.add(RuleServiceIPFamilies, "spec.clusterIPs["+strconv.Itoa(i)+"]", fam+" is not configured on this cluster (it serves "+joinFamilies(configured)+")")
			continue
		}
		families = append(families, fam)
	}
	return families
}

// servedFamilies checks the policy and the families against those the cluster serves
// (configured): RequireDualStack needs two, and each IPv4 or IPv6 family named must be served.
func (c *checker) servedFamilies(policy string, families []string, configured []corev1.IPFamily) {
	if policy == string(corev1.IPFamilyPolicyRequireDualStack) && len(configured) < 2 {
		c.add(RuleServiceIPFamilies, "spec.ipFamilyPolicy", "RequireDualStack, but this cluster is not configured for dual-stack Services (it serves "+joinFamilies(configured)+")")
	}
	for i, f := range families {
		if (f == string(corev1.IPv4Protocol) || f == string(corev1.IPv6Protocol)) && !slices.Contains(configured, corev1.IPFamily(f)) {
			c.add(RuleServiceIPFamilies, "spec.ipFamilies["+strconv.Itoa(i)+"]", f+" is not configured on this cluster (it serves "+joinFamilies(configured)+")")
		}
	}
}

// boundedList is a list member's first maxFamilyEntries entries.
func boundedList(v any) []any {
	l := listOf(v)
	return l[:min(len(l), maxFamilyEntries)]
}

// ipFamilyOf is the family of an IP address as the API server tells it (an IPv4-mapped IPv6
// address is IPv4); false when s is not an address.
func ipFamilyOf(s string) (string, bool) {
	if len(s) > 64 { // longer than any address
		return "", false
	}
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return "", false
	case a.Is4() || a.Is4In6():
		return string(corev1.IPv4Protocol), true
	}
	return string(corev1.IPv6Protocol), true
}

func joinFamilies(fs []corev1.IPFamily) string {
	out := ""
	for i, f := range fs {
		if i > 0 {
			out += " and "
		}
		out += string(f)
	}
	return out
}
