package k8sfields

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podpatch/podpatch/policies/versions"
)

// The rules of a Service spec's fields: type, ports, IPs, session affinity and traffic policy.

// validateServiceSpecPatch checks the Service spec fields a policy sets.
func validateServiceSpecPatch(s *corev1.ServiceSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName:
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), string(s.Type), []corev1.ServiceType{
			corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName,
		}))
	}
	errs = append(errs, validateServicePortsPatch(s.Ports, fld.Child("ports"))...)
	errs = append(errs, validateLabelMap(s.Selector, fld.Child("selector"))...)
	switch s.ExternalTrafficPolicy {
	case "", corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal:
	default:
		errs = append(errs, field.NotSupported(fld.Child("externalTrafficPolicy"), string(s.ExternalTrafficPolicy),
			[]corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}))
	}
	if p := s.InternalTrafficPolicy; p != nil {
		switch *p {
		case corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal:
		default:
			errs = append(errs, field.NotSupported(fld.Child("internalTrafficPolicy"), string(*p),
				[]corev1.ServiceInternalTrafficPolicy{corev1.ServiceInternalTrafficPolicyCluster, corev1.ServiceInternalTrafficPolicyLocal}))
		}
	}
	switch s.SessionAffinity {
	case "", corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP:
	default:
		errs = append(errs, field.NotSupported(fld.Child("sessionAffinity"), string(s.SessionAffinity),
			[]corev1.ServiceAffinity{corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP}))
	}
	for i, r := range s.LoadBalancerSourceRanges {
		// Kubernetes accepts space-padded ranges here, for historical reasons; from 1.36 it
		// refuses bits beyond the prefix and leading zeros (versions.StrictIPs), which every
		// older server accepts too: strict holds on every version.
		errs = append(errs, validation.IsValidCIDRForLegacyField(fld.Child("loadBalancerSourceRanges").Index(i), strings.TrimSpace(r), versions.StrictIPs.HoldsOnAny(), nil)...)
	}
	const assigned = "immutable and assigned by the API server; only \"None\" (a headless Service) may be set"
	if s.ClusterIP != "" && s.ClusterIP != corev1.ClusterIPNone {
		errs = append(errs, field.Forbidden(fld.Child("clusterIP"), assigned))
	}
	for i, ip := range s.ClusterIPs {
		if ip != corev1.ClusterIPNone {
			errs = append(errs, field.Forbidden(fld.Child("clusterIPs").Index(i), assigned))
		}
	}
	for i, ip := range s.ExternalIPs {
		errs = append(errs, validateEndpointIP(ip, fld.Child("externalIPs").Index(i))...)
	}
	return append(errs, validateServiceTypeFieldsPatch(s, fld)...)
}

// validateServicePortsPatch checks Service ports; port names are unique.
func validateServicePortsPatch(ports []corev1.ServicePort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make(map[string]bool, len(ports))
	keys := make(map[string]bool, len(ports)) // port/protocol: ports merge by both
	for i, port := range ports {
		p := fld.Index(i)
		if port.Port == 0 {
			errs = append(errs, field.Required(p.Child("port"), "the port number, 1-65535"))
		} else {
			errs = append(errs, invalidIf(p.Child("port"), port.Port, validation.IsValidPortNum(int(port.Port)))...)
		}
		if port.Name != "" {
			errs = append(errs, invalidIf(p.Child("name"), port.Name, validation.IsDNS1123Label(port.Name))...)
			if names[port.Name] {
				errs = append(errs, field.Duplicate(p.Child("name"), port.Name))
			}
			names[port.Name] = true
		}
		errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
		key := fmt.Sprintf("%d/%s", port.Port, cmp.Or(port.Protocol, corev1.ProtocolTCP))
		if port.Port != 0 && keys[key] {
			errs = append(errs, field.Duplicate(p, key))
		}
		keys[key] = true
		if port.NodePort != 0 {
			errs = append(errs, invalidIf(p.Child("nodePort"), port.NodePort, validation.IsValidPortNum(int(port.NodePort)))...)
		}
		if port.AppProtocol != nil {
			errs = append(errs, invalidIf(p.Child("appProtocol"), *port.AppProtocol, validation.IsQualifiedName(*port.AppProtocol))...)
		}
		switch tp := port.TargetPort; tp.Type {
		case intstr.Int:
			if tp.IntVal != 0 {
				errs = append(errs, invalidIf(p.Child("targetPort"), tp.IntVal, validation.IsValidPortNum(int(tp.IntVal)))...)
			}
		case intstr.String:
			errs = append(errs, invalidIf(p.Child("targetPort"), tp.StrVal, validation.IsValidPortName(tp.StrVal))...)
		}
	}
	return errs
}

// validateEndpointIP checks an address traffic is sent to: a valid IP, not unspecified,
// loopback or link-local.
func validateEndpointIP(ip string, fld *field.Path) field.ErrorList {
	if errs := validation.IsValidIPForLegacyField(fld, ip, versions.StrictIPs.HoldsOnAny(), nil); len(errs) > 0 {
		return errs
	}
	addr := net.ParseIP(ip)
	switch {
	case addr.IsUnspecified():
		return field.ErrorList{field.Invalid(fld, ip, "may not be unspecified (0.0.0.0, ::)")}
	case addr.IsLoopback():
		return field.ErrorList{field.Invalid(fld, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)")}
	case addr.IsLinkLocalUnicast():
		return field.ErrorList{field.Invalid(fld, ip, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")}
	case addr.IsLinkLocalMulticast():
		return field.ErrorList{field.Invalid(fld, ip, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")}
	}
	return nil
}

// maxClientIPAffinitySeconds is the longest ClientIP session affinity Kubernetes allows.
const maxClientIPAffinitySeconds = 86400

// validateServiceTypeFieldsPatch checks the Service fields that only some types allow. The
// policy must set the type such a field needs (or, for externalTrafficPolicy, externalIPs)
// itself: the object's type is not known, and the Dask scheduler Service is a ClusterIP one.
func validateServiceTypeFieldsPatch(s *corev1.ServiceSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	lb := s.Type == corev1.ServiceTypeLoadBalancer
	external := lb || s.Type == corev1.ServiceTypeNodePort
	needs := func(name, what string) {
		errs = append(errs, field.Forbidden(fld.Child(name), "may be set only "+what+", in the same policy"))
	}
	if s.ClusterIP == corev1.ClusterIPNone && external {
		errs = append(errs, field.Invalid(fld.Child("clusterIP"), s.ClusterIP, "may not be None for a "+string(s.Type)+" Service"))
	}
	if s.Type == corev1.ServiceTypeExternalName {
		name := strings.TrimSuffix(s.ExternalName, ".")
		if name == "" {
			errs = append(errs, field.Required(fld.Child("externalName"), "the DNS name an ExternalName Service points to, in the same policy"))
		} else {
			errs = append(errs, invalidIf(fld.Child("externalName"), s.ExternalName, validation.IsDNS1123Subdomain(name))...)
		}
		if s.ClusterIP != "" {
			errs = append(errs, field.Forbidden(fld.Child("clusterIP"), "may not be set for an ExternalName Service"))
		}
		if len(s.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(fld.Child("ipFamilies"), "may not be set for an ExternalName Service"))
		}
		if s.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(fld.Child("ipFamilyPolicy"), "may not be set for an ExternalName Service"))
		}
	}
	if s.ExternalTrafficPolicy != "" && !external && len(s.ExternalIPs) == 0 {
		needs("externalTrafficPolicy", "for an externally reachable Service (type NodePort or LoadBalancer, or externalIPs)")
	}
	if s.HealthCheckNodePort != 0 {
		if !lb || s.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			needs("healthCheckNodePort", "with type LoadBalancer and externalTrafficPolicy Local")
		}
		errs = append(errs, invalidIf(fld.Child("healthCheckNodePort"), s.HealthCheckNodePort, validation.IsValidPortNum(int(s.HealthCheckNodePort)))...)
	}
	if len(s.LoadBalancerSourceRanges) > 0 && !lb {
		needs("loadBalancerSourceRanges", "with type LoadBalancer")
	}
	if c := s.LoadBalancerClass; c != nil {
		if !lb {
			needs("loadBalancerClass", "with type LoadBalancer")
		}
		errs = append(errs, invalidIf(fld.Child("loadBalancerClass"), *c, validation.IsQualifiedName(*c))...)
	}
	if s.AllocateLoadBalancerNodePorts != nil && !lb {
		needs("allocateLoadBalancerNodePorts", "with type LoadBalancer")
	}
	for i, port := range s.Ports {
		if port.NodePort != 0 && !external {
			needs("ports["+strconv.Itoa(i)+"].nodePort", "with type NodePort or LoadBalancer")
		}
	}
	if c := s.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		if t := *c.ClientIP.TimeoutSeconds; t <= 0 || t > maxClientIPAffinitySeconds {
			errs = append(errs, field.Invalid(fld.Child("sessionAffinityConfig", "clientIP", "timeoutSeconds"), t,
				fmt.Sprintf("must be between 1 and %d", maxClientIPAffinitySeconds)))
		}
	}
	if p := s.IPFamilyPolicy; p != nil {
		errs = append(errs, notSupported(fld.Child("ipFamilyPolicy"), *p,
			corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)...)
	}
	if len(s.IPFamilies) > 2 {
		errs = append(errs, field.TooMany(fld.Child("ipFamilies"), len(s.IPFamilies), 2))
	}
	for i, f := range s.IPFamilies {
		p := fld.Child("ipFamilies").Index(i)
		errs = append(errs, notSupported(p, f, corev1.IPv4Protocol, corev1.IPv6Protocol)...)
		if slices.Contains(s.IPFamilies[:i], f) {
			errs = append(errs, field.Duplicate(p, string(f)))
		}
	}
	if td := s.TrafficDistribution; td != nil {
		errs = append(errs, notSupported(fld.Child("trafficDistribution"), *td, corev1.ServiceTrafficDistributionPreferClose,
			corev1.ServiceTrafficDistributionPreferSameZone, corev1.ServiceTrafficDistributionPreferSameNode)...)
	}
	return errs
}
