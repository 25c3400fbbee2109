// Package externalurl resolves the externally reachable URL of the Services that ask for it
// and writes it back onto them (reference §6): the Spark-on-Kubernetes driver-URI contract
// (apache-spark-on-k8s #140, #147), generalised to every manager podpatch recognises.
//
// resolve.go is the pure part (a Service, the nodes and the options in, a URL or a reason
// out); resolver.go is the Kubernetes side: informers, patches, Events, on the elected replica.
package externalurl

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/externalurl/urltemplate"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// Source says where a URL came from; it is the value of podpatch.io/external-url-source.
type Source string

// The sources, in resolution order.
const (
	SourceTemplate     Source = "template"
	SourceLoadBalancer Source = "load-balancer"
	SourceNodePort     Source = "node-port"
)

// Node is what resolution needs of a Node: its name (the tie-break), addresses and readiness.
type Node struct {
	Name      string
	Addresses []corev1.NodeAddress
	// NotReady is true when the node reports Ready False or Unknown; a node that reports no
	// Ready condition at all counts as ready.
	NotReady bool
}

// DefaultAddressTypes is the order in which node addresses are tried: ExternalIP first, so a
// NodePort URL is reachable from outside the cluster whenever the nodes have such an address.
var DefaultAddressTypes = []corev1.NodeAddressType{
	corev1.NodeExternalIP, corev1.NodeExternalDNS, corev1.NodeInternalIP, corev1.NodeInternalDNS, corev1.NodeHostName,
}

// Input is everything a resolution depends on.
type Input struct {
	Service *corev1.Service
	// NodePorts enables the node-port source; Nodes are then the cluster's nodes.
	NodePorts    bool
	Nodes        []Node
	AddressTypes []corev1.NodeAddressType
}

// Request is what a Service asks for.
type Request struct {
	// URL: podpatch.io/provide-external-url is "true".
	URL bool
	// Legacy: spark-job.alpha.apache.org/provideExternalUri is set (and not "false").
	Legacy bool
}

// Any says whether the Service asks for anything.
func (r Request) Any() bool { return r.URL || r.Legacy }

// RequestOf reads the request annotations.
func RequestOf(annotations map[string]string) Request {
	var r Request
	if v, ok := annotations[policies.ProvideExternalURLAnnotation]; ok {
		r.URL, _ = strconv.ParseBool(strings.TrimSpace(v)) // anything but a true value asks for nothing
	}
	if v, ok := annotations[policies.SparkProvideExternalURIAnnotation]; ok {
		// Spark set "true"; the contract is the annotation's presence.
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		r.Legacy = err != nil || b
	}
	return r
}

// ResultAnnotations are the annotations the resolver writes, and the only ones it ever patches.
var ResultAnnotations = []string{
	policies.ExternalURLAnnotation, policies.ExternalURLSourceAnnotation, policies.SparkResolvedExternalURIAnnotation,
}

// HasResults says whether an object carries any result annotation, so that the resolver
// removes them when the request goes away.
func HasResults(annotations map[string]string) bool {
	for _, k := range ResultAnnotations {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// Result is the outcome of a resolution.
type Result struct {
	Request Request
	// Identity is what the profiles recognised (empty Manager: nothing).
	Identity profiles.Identity
	// URL and Source, or, when URL is empty, Reason says why.
	URL    string
	Source Source
	Reason string
	// Invalid: the reason is a mistake in the Service's annotations (a template that fails,
	// a port it does not have). Refused: a URL was resolved — by a template from the values it
	// read, or from an address —, and it is not one podpatch writes (urltemplate.CheckURL:
	// not http or https, not a URL, no host, user information, too long). Pending:
	// the URL waits for a load balancer's address, which normally comes.
	Invalid, Refused, Pending bool
}

// Annotations returns the wanted value of every result annotation; "" means absent.
func (r Result) Annotations() map[string]string {
	want := map[string]string{}
	for _, k := range ResultAnnotations {
		want[k] = ""
	}
	if r.URL == "" {
		return want
	}
	if r.Request.URL {
		want[policies.ExternalURLAnnotation] = r.URL
		want[policies.ExternalURLSourceAnnotation] = string(r.Source)
	}
	if r.Request.Legacy {
		want[policies.SparkResolvedExternalURIAnnotation] = r.URL
	}
	return want
}

// Resolve computes a Service's external URL: the template if it has one; else a load-balancer
// ingress hostname, then IP, with the port; else a node port on a node address; else nothing
// yet, with the reason.
func Resolve(in Input) Result {
	svc := in.Service
	res := Result{Request: RequestOf(svc.Annotations)}
	if !res.Request.Any() {
		return res
	}
	res.Identity, _ = profiles.Recognise(profiles.KindService, svc.Labels, svc.Spec.Selector)
	port, err := selectPort(svc, res.Identity.Manager)
	if err != nil {
		return res.invalid(err.Error())
	}

	host, hostPort, source, why := address(in, port)
	res.Pending = host == "" && svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) == 0
	text := strings.TrimSpace(svc.Annotations[policies.ExternalURLTemplateAnnotation])
	if text != "" {
		tmpl, err := urltemplate.Parse(text)
		if err != nil {
			return res.invalid(fmt.Sprintf("%s: %v", policies.ExternalURLTemplateAnnotation, err))
		}
		if tmpl.UsesPort() && port == nil {
			return res.invalid(fmt.Sprintf("%s uses the port, and the Service has none", policies.ExternalURLTemplateAnnotation))
		}
		if tmpl.UsesHost() && host == "" {
			res.Reason = fmt.Sprintf("%s uses the host: %s", policies.ExternalURLTemplateAnnotation, why)
			return res
		}
		f := urltemplate.Fields{Name: svc.Name, Namespace: svc.Namespace, Cluster: res.Identity.Cluster,
			Group: res.Identity.Group, Manager: string(res.Identity.Manager), Role: string(res.Identity.Role), Host: host}
		switch {
		case host != "":
			f.Port = hostPort
		case port != nil:
			f.Port = port.Port
		}
		url, err := tmpl.Execute(f)
		if urlErr := (*urltemplate.Error)(nil); errors.As(err, &urlErr) {
			return res.refuse(fmt.Sprintf("the template's URL is refused: %s: %v", policies.ExternalURLTemplateAnnotation, err))
		}
		if err != nil {
			return res.invalid(fmt.Sprintf("%s: %v", policies.ExternalURLTemplateAnnotation, err))
		}
		return res.resolved(url, SourceTemplate)
	}
	if host == "" {
		res.Reason = why
		return res
	}
	return res.resolved(scheme(port)+"://"+net.JoinHostPort(host, strconv.Itoa(int(hostPort))), source)
}

// resolved is the result with a URL, if the URL is one podpatch writes: every URL is checked
// where it is made, whatever its source — a template renders what the Service's labels say, a
// load balancer's host name is what its controller wrote —, so a javascript: or data: URL,
// or one that does not parse, never reaches an annotation or an Event.
func (r Result) resolved(url string, source Source) Result {
	if err := urltemplate.CheckURL(url); err != nil {
		return r.refuse(fmt.Sprintf("the %s URL is refused: %v", source, err))
	}
	r.URL, r.Source, r.Pending = url, source, false
	return r
}

func (r Result) refuse(reason string) Result {
	r.Reason, r.Refused, r.Pending = reason, true, false
	return r
}

func (r Result) invalid(reason string) Result {
	r.Reason, r.Invalid, r.Pending = reason, true, false
	return r
}

// selectPort picks the Service port to expose: the one podpatch.io/external-url-port names
// (by name, else by number), else the manager's UI port, else the first. nil: no ports.
func selectPort(svc *corev1.Service, m profiles.Manager) (*corev1.ServicePort, error) {
	ports := svc.Spec.Ports
	if want := strings.TrimSpace(svc.Annotations[policies.ExternalURLPortAnnotation]); want != "" {
		for i := range ports {
			if ports[i].Name == want {
				return &ports[i], nil
			}
		}
		if n, err := strconv.ParseInt(want, 10, 32); err == nil {
			for i := range ports {
				if int64(ports[i].Port) == n {
					return &ports[i], nil
				}
			}
		}
		return nil, fmt.Errorf("%s: the Service has no port %q", policies.ExternalURLPortAnnotation, want)
	}
	if len(ports) == 0 {
		return nil, nil
	}
	pr, _ := profiles.Of(m) // the manager's UI port (reference §6); none for an unrecognised Service
	ui := pr.UI
	for _, name := range ui.Names {
		for i := range ports {
			if ports[i].Name == name {
				return &ports[i], nil
			}
		}
	}
	for _, n := range ui.Numbers {
		for i := range ports {
			if ports[i].Port == n {
				return &ports[i], nil
			}
		}
	}
	return &ports[0], nil
}

// address finds the load-balancer or node address and the port that goes with it, or says
// why there is none.
func address(in Input, port *corev1.ServicePort) (host string, hostPort int32, source Source, why string) {
	svc := in.Service
	typ := svc.Spec.Type
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	if typ == corev1.ServiceTypeLoadBalancer {
		host = lbHost(svc.Status.LoadBalancer.Ingress)
		if host != "" {
			if port == nil {
				return "", 0, "", "the Service has no port"
			}
			return host, port.Port, SourceLoadBalancer, ""
		}
		why = "the load balancer has no address yet"
	}
	if typ != corev1.ServiceTypeLoadBalancer && typ != corev1.ServiceTypeNodePort {
		return "", 0, "", fmt.Sprintf("a %s Service has no external address: give it a template (%s) or make it a LoadBalancer or NodePort Service",
			typ, policies.ExternalURLTemplateAnnotation)
	}
	and := func(s string) string {
		if why == "" {
			return s
		}
		return why + ", and " + s
	}
	switch {
	case port == nil:
		return "", 0, "", and("the Service has no port")
	case port.NodePort == 0:
		return "", 0, "", and(fmt.Sprintf("port %d has no node port", port.Port))
	case !in.NodePorts:
		return "", 0, "", and("node-port resolution is off")
	}
	addr := nodeAddress(in.Nodes, in.AddressTypes)
	if addr == "" {
		return "", 0, "", and(fmt.Sprintf("no ready node has an address of type %s", joinTypes(in.AddressTypes)))
	}
	return addr, port.NodePort, SourceNodePort, ""
}

// lbHost is the first ingress hostname, else the first IP.
func lbHost(ingress []corev1.LoadBalancerIngress) string {
	for _, i := range ingress {
		if i.Hostname != "" {
			return i.Hostname
		}
	}
	for _, i := range ingress {
		if i.IP != "" {
			return i.IP
		}
	}
	return ""
}

// nodeAddress picks, for the first address type any ready node has, that address of the node
// whose name sorts first: the same node for every Service, and a stable choice as long as that
// node stays.
func nodeAddress(nodes []Node, types []corev1.NodeAddressType) string {
	for _, typ := range types {
		best, addr := "", ""
		for _, n := range nodes {
			if n.NotReady || (addr != "" && n.Name >= best) {
				continue
			}
			for _, a := range n.Addresses {
				if a.Type == typ && a.Address != "" {
					best, addr = n.Name, a.Address
					break
				}
			}
		}
		if addr != "" {
			return addr
		}
	}
	return ""
}

func joinTypes(types []corev1.NodeAddressType) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// scheme is https for a port that says so (name or appProtocol https, or 443), else http.
func scheme(p *corev1.ServicePort) string {
	name := strings.ToLower(p.Name)
	if p.Port == 443 || name == "https" || strings.HasPrefix(name, "https-") || strings.HasSuffix(name, "-https") ||
		(p.AppProtocol != nil && strings.EqualFold(strings.TrimPrefix(*p.AppProtocol, "kubernetes.io/"), "https")) {
		return "https"
	}
	return "http"
}
