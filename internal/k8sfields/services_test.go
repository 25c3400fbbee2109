package k8sfields

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestServiceSpec: a policy's partial Service spec against the rules Kubernetes applies to the
// same fields, one error per row at its path.
func TestServiceSpec(t *testing.T) {
	spec := func(s corev1.ServiceSpec) *corev1.ServiceSpec { return &s }
	port := func(p corev1.ServicePort) *corev1.ServiceSpec {
		return spec(corev1.ServiceSpec{Ports: []corev1.ServicePort{p}})
	}

	valid := &corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer,
		Ports: []corev1.ServicePort{
			{Name: "tcp-comm", Port: 8786, TargetPort: intstr.FromInt32(8786), Protocol: corev1.ProtocolTCP},
			{Name: "http-dashboard", Port: 8787, TargetPort: intstr.FromString("dashboard"), NodePort: 30087},
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		},
		Selector:                      map[string]string{"app.kubernetes.io/name": "dask"},
		ExternalTrafficPolicy:         corev1.ServiceExternalTrafficPolicyLocal,
		InternalTrafficPolicy:         new(corev1.ServiceInternalTrafficPolicyCluster),
		SessionAffinity:               corev1.ServiceAffinityClientIP,
		LoadBalancerSourceRanges:      []string{"10.0.0.0/8", " 192.168.0.0/16 ", "2001:db8::/32"},
		ExternalIPs:                   []string{"203.0.113.10", "2001:db8::10"},
		LoadBalancerClass:             new("example.com/internal"),
		AllocateLoadBalancerNodePorts: new(false),
		SessionAffinityConfig:         &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(600))}},
		IPFamilyPolicy:                new(corev1.IPFamilyPolicyPreferDualStack),
		IPFamilies:                    []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
		TrafficDistribution:           new(corev1.ServiceTrafficDistributionPreferClose),
	}

	cases := []fieldErrorCase[corev1.ServiceSpec]{
		{name: "valid service", patch: valid},
		{name: "empty service", patch: &corev1.ServiceSpec{}},
		{name: "headless service", patch: spec(corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, ClusterIPs: []string{corev1.ClusterIPNone}})},
		{name: "ExternalName service", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "dask.example.com."})},
		{name: "externalTrafficPolicy with externalIPs", patch: spec(corev1.ServiceSpec{ExternalIPs: []string{"203.0.113.10"}, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal})},

		{name: "type", patch: spec(corev1.ServiceSpec{Type: "Internal"}),
			wantField: "spec.service.spec.type", wantType: field.ErrorTypeNotSupported},
		{name: "port required", patch: port(corev1.ServicePort{Name: "http"}),
			wantField: "spec.service.spec.ports[0].port", wantType: field.ErrorTypeRequired},
		{name: "port range", patch: port(corev1.ServicePort{Port: 70000}),
			wantField: "spec.service.spec.ports[0].port", wantType: field.ErrorTypeInvalid},
		{name: "port name", patch: port(corev1.ServicePort{Port: 80, Name: "HTTP"}),
			wantField: "spec.service.spec.ports[0].name", wantType: field.ErrorTypeInvalid},
		{name: "port name duplicate", patch: spec(corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, Name: "http"}, {Port: 8080, Name: "http"}}}),
			wantField: "spec.service.spec.ports[1].name", wantType: field.ErrorTypeDuplicate},
		{name: "port protocol", patch: port(corev1.ServicePort{Port: 80, Protocol: "HTTP"}),
			wantField: "spec.service.spec.ports[0].protocol", wantType: field.ErrorTypeNotSupported},
		{name: "nodePort range", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80, NodePort: 70000}}}),
			wantField: "spec.service.spec.ports[0].nodePort", wantType: field.ErrorTypeInvalid},
		{name: "targetPort number", patch: port(corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(70000)}),
			wantField: "spec.service.spec.ports[0].targetPort", wantType: field.ErrorTypeInvalid},
		{name: "targetPort name", patch: port(corev1.ServicePort{Port: 80, TargetPort: intstr.FromString("web_http")}),
			wantField: "spec.service.spec.ports[0].targetPort", wantType: field.ErrorTypeInvalid},
		{name: "selector key", patch: spec(corev1.ServiceSpec{Selector: map[string]string{"bad key": "x"}}),
			wantField: "spec.service.spec.selector", wantType: field.ErrorTypeInvalid},
		{name: "selector value", patch: spec(corev1.ServiceSpec{Selector: map[string]string{"app": "-dask"}}),
			wantField: "spec.service.spec.selector", wantType: field.ErrorTypeInvalid},
		{name: "externalTrafficPolicy", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: "Global"}),
			wantField: "spec.service.spec.externalTrafficPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "internalTrafficPolicy", patch: spec(corev1.ServiceSpec{InternalTrafficPolicy: new(corev1.ServiceInternalTrafficPolicy("Global"))}),
			wantField: "spec.service.spec.internalTrafficPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "sessionAffinity", patch: spec(corev1.ServiceSpec{SessionAffinity: "Sticky"}),
			wantField: "spec.service.spec.sessionAffinity", wantType: field.ErrorTypeNotSupported},
		{name: "loadBalancerSourceRanges", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerSourceRanges: []string{"10.0.0.0/8", "10.1.0.0"}}),
			wantField: "spec.service.spec.loadBalancerSourceRanges[1]", wantType: field.ErrorTypeInvalid},
		{name: "clusterIP", patch: spec(corev1.ServiceSpec{ClusterIP: "10.96.0.10"}),
			wantField: "spec.service.spec.clusterIP", wantType: field.ErrorTypeForbidden, wantDetail: "immutable and assigned by the API server"},
		{name: "clusterIPs", patch: spec(corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.10"}}),
			wantField: "spec.service.spec.clusterIPs[0]", wantType: field.ErrorTypeForbidden},
		{name: "externalIPs not an IP", patch: spec(corev1.ServiceSpec{ExternalIPs: []string{"not-an-ip"}}),
			wantField: "spec.service.spec.externalIPs[0]", wantType: field.ErrorTypeInvalid},
		{name: "externalIPs loopback", patch: spec(corev1.ServiceSpec{ExternalIPs: []string{"127.0.0.1"}}),
			wantField: "spec.service.spec.externalIPs[0]", wantType: field.ErrorTypeInvalid, wantDetail: "loopback"},
		{name: "externalIPs link-local", patch: spec(corev1.ServiceSpec{ExternalIPs: []string{"169.254.1.1"}}),
			wantField: "spec.service.spec.externalIPs[0]", wantType: field.ErrorTypeInvalid, wantDetail: "link-local"},
		{name: "externalIPs with a leading zero", patch: spec(corev1.ServiceSpec{ExternalIPs: []string{"10.0.0.010"}}),
			wantField: "spec.service.spec.externalIPs[0]", wantType: field.ErrorTypeInvalid},
		{name: "port appProtocol", patch: port(corev1.ServicePort{Name: "m", Port: 9000, AppProtocol: new("not valid!")}),
			wantField: "spec.service.spec.ports[0].appProtocol", wantType: field.ErrorTypeInvalid},
		{name: "port and protocol duplicate", patch: spec(corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "a", Port: 80}, {Name: "b", Port: 80, Protocol: corev1.ProtocolTCP}}}),
			wantField: "spec.service.spec.ports[1]", wantType: field.ErrorTypeDuplicate},
		{name: "nodePort on a ClusterIP Service", patch: port(corev1.ServicePort{Name: "m", Port: 9000, NodePort: 30080}),
			wantField: "spec.service.spec.ports[0].nodePort", wantType: field.ErrorTypeForbidden, wantDetail: "type NodePort or LoadBalancer"},
		{name: "LoadBalancer headless", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: corev1.ClusterIPNone}),
			wantField: "spec.service.spec.clusterIP", wantType: field.ErrorTypeInvalid},
		{name: "ExternalName without externalName", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName}),
			wantField: "spec.service.spec.externalName", wantType: field.ErrorTypeRequired},
		{name: "ExternalName with a bad name", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "not a name"}),
			wantField: "spec.service.spec.externalName", wantType: field.ErrorTypeInvalid},
		{name: "ExternalName with ipFamilyPolicy", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "a.example.com",
			IPFamilyPolicy: new(corev1.IPFamilyPolicySingleStack)}),
			wantField: "spec.service.spec.ipFamilyPolicy", wantType: field.ErrorTypeForbidden},
		{name: "externalTrafficPolicy on a ClusterIP Service", patch: spec(corev1.ServiceSpec{ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal}),
			wantField: "spec.service.spec.externalTrafficPolicy", wantType: field.ErrorTypeForbidden},
		{name: "healthCheckNodePort without Local", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, HealthCheckNodePort: 30500}),
			wantField: "spec.service.spec.healthCheckNodePort", wantType: field.ErrorTypeForbidden},
		{name: "loadBalancerSourceRanges on a ClusterIP Service", patch: spec(corev1.ServiceSpec{LoadBalancerSourceRanges: []string{"10.0.0.0/8"}}),
			wantField: "spec.service.spec.loadBalancerSourceRanges", wantType: field.ErrorTypeForbidden},
		{name: "loadBalancerClass on a ClusterIP Service", patch: spec(corev1.ServiceSpec{LoadBalancerClass: new("example.com/lb")}),
			wantField: "spec.service.spec.loadBalancerClass", wantType: field.ErrorTypeForbidden},
		{name: "loadBalancerClass name", patch: spec(corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: new("not valid!")}),
			wantField: "spec.service.spec.loadBalancerClass", wantType: field.ErrorTypeInvalid},
		{name: "allocateLoadBalancerNodePorts on a ClusterIP Service", patch: spec(corev1.ServiceSpec{AllocateLoadBalancerNodePorts: new(true)}),
			wantField: "spec.service.spec.allocateLoadBalancerNodePorts", wantType: field.ErrorTypeForbidden},
		{name: "sessionAffinity timeout", patch: spec(corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: new(int32(0))}}}),
			wantField: "spec.service.spec.sessionAffinityConfig.clientIP.timeoutSeconds", wantType: field.ErrorTypeInvalid},
		{name: "ipFamilyPolicy", patch: spec(corev1.ServiceSpec{IPFamilyPolicy: new(corev1.IPFamilyPolicy("DualStack"))}),
			wantField: "spec.service.spec.ipFamilyPolicy", wantType: field.ErrorTypeNotSupported},
		{name: "ipFamilies duplicate", patch: spec(corev1.ServiceSpec{IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv4Protocol}}),
			wantField: "spec.service.spec.ipFamilies[1]", wantType: field.ErrorTypeDuplicate},
		{name: "trafficDistribution", patch: spec(corev1.ServiceSpec{TrafficDistribution: new("Nearby")}),
			wantField: "spec.service.spec.trafficDistribution", wantType: field.ErrorTypeNotSupported},
	}
	checkFieldErrors(t, cases, ServiceSpec, field.NewPath("spec", "service", "spec"))
}
