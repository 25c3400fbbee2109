package externalurl

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// Service shapes of the managers, as in policies/testdata/fixtures.
var (
	daskLabels = map[string]string{"dask.org/cluster-name": "simple", "dask.org/component": "scheduler"}
	daskPorts  = []corev1.ServicePort{{Name: "tcp-comm", Port: 8786, NodePort: 30786}, {Name: "http-dashboard", Port: 8787, NodePort: 30787}}
	sparkSel   = map[string]string{"spark-app-name": "spark-pi", "spark-app-selector": "spark-1", "spark-role": "driver"}
	sparkPorts = []corev1.ServicePort{{Name: "driver-rpc-port", Port: 7078}, {Name: "blockmanager", Port: 7079}, {Name: "spark-ui", Port: 4040}}
	rayLabels  = map[string]string{"ray.io/cluster": "raycluster-kuberay", "ray.io/node-type": "head"}
	rayPorts   = []corev1.ServicePort{{Name: "client", Port: 10001}, {Name: "dashboard", Port: 8265}, {Name: "gcs-server", Port: 6379}}
	flinkSel   = map[string]string{"app": "basic-example", "component": "jobmanager", "type": "flink-native-kubernetes"}
	flinkPorts = []corev1.ServicePort{{Name: "rest", Port: 8081}}
)

// svc builds a Service; ann are its annotations (the request is added unless ann sets one).
type svcOpt func(*corev1.Service)

func svc(opts ...svcOpt) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "simple-scheduler", Namespace: "team-a", Labels: daskLabels,
			Annotations: map[string]string{policies.ProvideExternalURLAnnotation: "true"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: daskLabels, Ports: daskPorts},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func typ(t corev1.ServiceType) svcOpt { return func(s *corev1.Service) { s.Spec.Type = t } }
func ann(k, v string) svcOpt          { return func(s *corev1.Service) { s.Annotations[k] = v } }
func noAnn(k string) svcOpt           { return func(s *corev1.Service) { delete(s.Annotations, k) } }
func ingress(in ...corev1.LoadBalancerIngress) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Type, s.Status.LoadBalancer.Ingress = corev1.ServiceTypeLoadBalancer, in
	}
}
func ports(p ...corev1.ServicePort) svcOpt { return func(s *corev1.Service) { s.Spec.Ports = p } }
func shape(name string, labels, selector map[string]string, p []corev1.ServicePort) svcOpt {
	return func(s *corev1.Service) { s.Name, s.Labels, s.Spec.Selector, s.Spec.Ports = name, labels, selector, p }
}
func template(t string) svcOpt { return ann(policies.ExternalURLTemplateAnnotation, t) }

var nodes = []Node{
	{Name: "node-b", Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeExternalIP, Address: "198.51.100.2"}}},
	{Name: "node-a", Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "node-a"}}},
	{Name: "node-0", NotReady: true, Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.9"}}},
	{Name: "node-c", Addresses: []corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "198.51.100.3"}}},
}

func TestResolve(t *testing.T) {
	proto := func(s string) *string { return &s }
	cases := []struct {
		name      string
		svc       *corev1.Service
		nodePorts bool
		nodes     []Node
		types     []corev1.NodeAddressType
		// want: URL and source; or reason (a substring) and whether it is invalid.
		url     string
		source  Source
		reason  string
		invalid bool
		pending bool
	}{
		// Requests.
		{name: "no request", svc: svc(noAnn(policies.ProvideExternalURLAnnotation), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"}))},
		{name: "request false", svc: svc(ann(policies.ProvideExternalURLAnnotation, "false"), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"}))},
		{name: "legacy request false", svc: svc(noAnn(policies.ProvideExternalURLAnnotation), ann(policies.SparkProvideExternalURIAnnotation, "false"), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"}))},

		// Sources, in order.
		{name: "template before load balancer", svc: svc(template("https://${cluster}-${manager}.${namespace}.apps.example.com"), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "https://simple-dask.team-a.apps.example.com", source: SourceTemplate},
		{name: "load balancer hostname before IP", svc: svc(ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"}, corev1.LoadBalancerIngress{Hostname: "a1b2.elb.example.com"})),
			url: "http://a1b2.elb.example.com:8787", source: SourceLoadBalancer},
		{name: "load balancer IP", svc: svc(ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "http://203.0.113.1:8787", source: SourceLoadBalancer},
		{name: "load balancer IPv6", svc: svc(ingress(corev1.LoadBalancerIngress{IP: "2001:db8::1"})),
			url: "http://[2001:db8::1]:8787", source: SourceLoadBalancer},
		{name: "load balancer pending: node port meanwhile", svc: svc(typ(corev1.ServiceTypeLoadBalancer)), nodePorts: true, nodes: nodes,
			url: "http://198.51.100.2:30787", source: SourceNodePort},
		{name: "load balancer pending, node ports off", svc: svc(typ(corev1.ServiceTypeLoadBalancer)), nodes: nodes,
			reason: "the load balancer has no address yet, and node-port resolution is off", pending: true},
		{name: "node port: ExternalIP first, ready node whose name sorts first", svc: svc(typ(corev1.ServiceTypeNodePort)), nodePorts: true, nodes: nodes,
			url: "http://198.51.100.2:30787", source: SourceNodePort},
		{name: "node port: configured order", svc: svc(typ(corev1.ServiceTypeNodePort)), nodePorts: true, nodes: nodes,
			types: []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP}, url: "http://10.0.0.1:30787", source: SourceNodePort},
		{name: "node port: fallback type", svc: svc(typ(corev1.ServiceTypeNodePort)), nodePorts: true, nodes: nodes[1:2],
			url: "http://10.0.0.1:30787", source: SourceNodePort},
		{name: "node port: no node", svc: svc(typ(corev1.ServiceTypeNodePort)), nodePorts: true,
			reason: "no ready node has an address of type ExternalIP, ExternalDNS, InternalIP, InternalDNS, Hostname"},
		{name: "node port: only not-ready nodes", svc: svc(typ(corev1.ServiceTypeNodePort)), nodePorts: true, nodes: nodes[2:3],
			reason: "no ready node"},
		{name: "node port: off", svc: svc(typ(corev1.ServiceTypeNodePort)), nodes: nodes, reason: "node-port resolution is off"},
		{name: "node port: port without one", svc: svc(typ(corev1.ServiceTypeNodePort), ports(corev1.ServicePort{Name: "http-dashboard", Port: 8787})),
			nodePorts: true, nodes: nodes, reason: "port 8787 has no node port"},
		{name: "cluster IP without template", svc: svc(), nodePorts: true, nodes: nodes,
			reason: "a ClusterIP Service has no external address: give it a template"},
		{name: "type unset is ClusterIP", svc: svc(typ("")), reason: "a ClusterIP Service"},

		// Port rules.
		{name: "port annotation by name", svc: svc(ann(policies.ExternalURLPortAnnotation, "tcp-comm"), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "http://203.0.113.1:8786", source: SourceLoadBalancer},
		{name: "port annotation by number", svc: svc(ann(policies.ExternalURLPortAnnotation, "8786"), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "http://203.0.113.1:8786", source: SourceLoadBalancer},
		{name: "port annotation names a missing port", svc: svc(ann(policies.ExternalURLPortAnnotation, "http"), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			reason: `podpatch.io/external-url-port: the Service has no port "http"`, invalid: true},
		{name: "spark UI port by number", svc: svc(shape("spark-pi-driver-svc", map[string]string{"spark-app-selector": "spark-1"}, sparkSel,
			[]corev1.ServicePort{{Name: "driver-rpc-port", Port: 7078}, {Name: "ui", Port: 4040}}), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "http://203.0.113.1:4040", source: SourceLoadBalancer},
		{name: "ray dashboard", svc: svc(shape("raycluster-kuberay-head-svc", rayLabels, rayLabels, rayPorts), ingress(corev1.LoadBalancerIngress{Hostname: "ray.example.com"})),
			url: "http://ray.example.com:8265", source: SourceLoadBalancer},
		{name: "flink rest", svc: svc(shape("basic-example-rest", map[string]string{"app": "basic-example", "type": "flink-native-kubernetes"}, flinkSel, flinkPorts), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "http://203.0.113.1:8081", source: SourceLoadBalancer},
		{name: "unrecognised: first port", svc: svc(shape("web", map[string]string{"app": "web"}, map[string]string{"app": "web"},
			[]corev1.ServicePort{{Name: "web", Port: 8080}, {Name: "admin", Port: 9090}}), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "http://203.0.113.1:8080", source: SourceLoadBalancer},
		{name: "https by port name", svc: svc(ports(corev1.ServicePort{Name: "https-ui", Port: 8443}), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "https://203.0.113.1:8443", source: SourceLoadBalancer},
		{name: "https by appProtocol", svc: svc(ports(corev1.ServicePort{Name: "ui", Port: 8443, AppProtocol: proto("kubernetes.io/https")}), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})),
			url: "https://203.0.113.1:8443", source: SourceLoadBalancer},
		{name: "no ports", svc: svc(ports(), ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})), reason: "the Service has no port"},

		// Templates.
		{name: "template: go fields", svc: svc(template("https://{{.Cluster}}.{{.Namespace}}.example.com/{{.Role}}/{{.Name}}:{{.Port}}")),
			url: "https://simple.team-a.example.com/scheduler/simple-scheduler:8787", source: SourceTemplate},
		{name: "template: spark-operator aliases", svc: svc(shape("spark-pi-ui-svc", nil, sparkSel, sparkPorts), template("https://{{$appName}}.{{$appNamespace}}.spark.example.com")),
			url: "https://spark-pi.team-a.spark.example.com", source: SourceTemplate},
		{name: "template: ray group", svc: svc(shape("x", map[string]string{"ray.io/cluster": "rc", "ray.io/node-type": "worker", "ray.io/group": "gpu"}, nil, rayPorts), template("https://${cluster}-${group}.example.com")),
			url: "https://rc-gpu.example.com", source: SourceTemplate},
		{name: "template: host from the load balancer", svc: svc(template("https://${host}/dask/${cluster}"), ingress(corev1.LoadBalancerIngress{Hostname: "lb.example.com"})),
			url: "https://lb.example.com/dask/simple", source: SourceTemplate},
		{name: "template: host and node port", svc: svc(typ(corev1.ServiceTypeNodePort), template("http://${host}:${port}/status")), nodePorts: true, nodes: nodes,
			url: "http://198.51.100.2:30787/status", source: SourceTemplate},
		{name: "template: host not known yet", svc: svc(typ(corev1.ServiceTypeLoadBalancer), template("https://${host}/")),
			reason: "podpatch.io/external-url-template uses the host: the load balancer has no address yet", pending: true},
		{name: "template: parse error", svc: svc(template("https://{{.Cluster")), reason: "podpatch.io/external-url-template: parse:", invalid: true},
		{name: "template: unknown token", svc: svc(template("https://${clustr}")), reason: "unknown token ${clustr}", invalid: true},
		{name: "template: not a URL", svc: svc(template("${cluster}")), reason: "must start with http:// or https://", invalid: true},
		{name: "template: port without ports", svc: svc(ports(), template("https://x.example.com:${port}")), reason: "uses the port, and the Service has none", invalid: true},
		{name: "template: no ports needed", svc: svc(ports(), template("https://${cluster}.example.com")),
			url: "https://simple.example.com", source: SourceTemplate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			types := c.types
			if types == nil {
				types = DefaultAddressTypes
			}
			before := c.svc.DeepCopy()
			got := Resolve(Input{Service: c.svc, NodePorts: c.nodePorts, Nodes: c.nodes, AddressTypes: types})
			require.Equal(t, before, c.svc, "Resolve does not change the Service")
			require.Equal(t, c.url, got.URL)
			require.Equal(t, c.source, got.Source)
			require.Equal(t, c.invalid, got.Invalid)
			require.Equal(t, c.pending, got.Pending)
			if c.reason == "" {
				require.Empty(t, got.Reason)
			} else {
				require.Contains(t, got.Reason, c.reason)
			}
		})
	}
}

func TestResultAnnotations(t *testing.T) {
	lb := ingress(corev1.LoadBalancerIngress{IP: "203.0.113.1"})
	in := func(s *corev1.Service) Input { return Input{Service: s, AddressTypes: DefaultAddressTypes} }

	got := Resolve(in(svc(lb))).Annotations()
	require.Equal(t, map[string]string{
		policies.ExternalURLAnnotation: "http://203.0.113.1:8787", policies.ExternalURLSourceAnnotation: "load-balancer",
		policies.SparkResolvedExternalURIAnnotation: ""}, got)

	// The legacy Spark pair, as is: only the legacy result.
	spark := svc(lb, noAnn(policies.ProvideExternalURLAnnotation), ann(policies.SparkProvideExternalURIAnnotation, "true"),
		shape("spark-pi-driver-svc", map[string]string{"spark-app-selector": "spark-1"}, sparkSel, sparkPorts))
	got = Resolve(in(spark)).Annotations()
	require.Equal(t, map[string]string{policies.ExternalURLAnnotation: "", policies.ExternalURLSourceAnnotation: "",
		policies.SparkResolvedExternalURIAnnotation: "http://203.0.113.1:4040"}, got)
	// Presence is the request, whatever the value.
	spark.Annotations[policies.SparkProvideExternalURIAnnotation] = ""
	require.Equal(t, "http://203.0.113.1:4040", Resolve(in(spark)).Annotations()[policies.SparkResolvedExternalURIAnnotation])

	// Both.
	both := svc(lb, ann(policies.SparkProvideExternalURIAnnotation, "true"))
	got = Resolve(in(both)).Annotations()
	require.Equal(t, "http://203.0.113.1:8787", got[policies.ExternalURLAnnotation])
	require.Equal(t, "http://203.0.113.1:8787", got[policies.SparkResolvedExternalURIAnnotation])

	// Unresolved or not requested: every result absent.
	for _, s := range []*corev1.Service{svc(), svc(lb, noAnn(policies.ProvideExternalURLAnnotation))} {
		for k, v := range Resolve(in(s)).Annotations() {
			require.Empty(t, v, k)
		}
	}
	require.True(t, HasResults(map[string]string{policies.SparkResolvedExternalURIAnnotation: "x"}))
	require.False(t, HasResults(map[string]string{policies.ProvideExternalURLAnnotation: "true"}))
}

// The identity comes from the profiles, as for admission: a Dask scheduler Service and the
// fields a template sees.
func TestResolveIdentity(t *testing.T) {
	got := Resolve(Input{Service: svc(template("https://${cluster}.example.com")), AddressTypes: DefaultAddressTypes})
	require.Equal(t, profiles.Identity{Manager: profiles.ManagerDask, Role: profiles.RoleScheduler, Cluster: "simple"}, got.Identity)
}
