package policies

import (
	"encoding/json"
	"strconv"
	"strings"
)

// apiServerDefaults is the one table of what the API server fills in a Pod or Service that a
// policy may bring whole (k8s.io/kubernetes pkg/apis/core/v1/defaults.go and its generated
// zz_generated.defaults.go, at the supported versions): the predicate "holds" (holds.go) does
// not count a member the re-applied object lacks where the stored one carries the default
// the API server would have written there. test/e2e's TestDefaultsTable creates the shapes
// through a real kube-apiserver and fails on a member it defaulted that the table lacks.
//
// Keys are paths of member names, "[]" for a list item, ".*" for every key of a map; every
// container list and every probe and lifecycle handler is expanded.
var apiServerDefaults = buildDefaults()

// apiServerDefault is a default: an object the API server writes when absent (its members are
// compared one by one), or a value, fixed or derived from the element it is in.
type apiServerDefault struct {
	object bool
	value  func(c *comparison, parent map[string]any) (any, bool)
}

func fixed(v any) apiServerDefault {
	if i, ok := v.(int); ok {
		v = json.Number(strconv.Itoa(i))
	}
	return apiServerDefault{value: func(*comparison, map[string]any) (any, bool) { return v, true }}
}

var objectDefault = apiServerDefault{object: true}

func buildDefaults() map[string]apiServerDefault {
	t := defaultsTable{}
	for _, list := range containerListNames {
		t.container("spec."+list+".[]", list != "ephemeralContainers")
	}
	t.volumes("spec.volumes.[]")
	// The Pod's own (SetDefaults_PodSpec), for a policy that removes one.
	t.add("spec.dnsPolicy", fixed("ClusterFirst"))
	t.add("spec.restartPolicy", fixed("Always"))
	t.add("spec.securityContext", objectDefault)
	t.add("spec.terminationGracePeriodSeconds", fixed(30))
	t.add("spec.schedulerName", fixed("default-scheduler"))
	t.add("spec.enableServiceLinks", fixed(true))
	// A Service's (SetDefaults_Service).
	t.add("spec.ports.[].protocol", fixed("TCP"))
	t.add("spec.ports.[].targetPort", apiServerDefault{value: targetPort})
	t.add("spec.sessionAffinity", fixed("None"))
	t.add("spec.type", fixed("ClusterIP"))
	t.add("spec.internalTrafficPolicy", fixed("Cluster"))
	t.add("spec.externalTrafficPolicy", fixed("Cluster"))
	t.add("spec.allocateLoadBalancerNodePorts", fixed(true))
	return t
}

// defaultsTable is the table buildDefaults fills, by path.
type defaultsTable map[string]apiServerDefault

func (t defaultsTable) add(path string, d apiServerDefault) { t[path] = d }

// httpGet adds the defaults of an httpGet handler at at.
func (t defaultsTable) httpGet(at string) {
	t.add(at+".httpGet.path", fixed("/"))
	t.add(at+".httpGet.scheme", fixed("HTTP"))
	// The H2CContainerProbe gate (alpha) writes the protocol.
	t.add(at+".httpGet.protocol", fixed("HTTP/1.1"))
}

// container adds the defaults of the containers of a list at c; requests only where the list's
// containers may have them (not ephemeral ones).
func (t defaultsTable) container(c string, requests bool) {
	t.add(c+".imagePullPolicy", apiServerDefault{value: imagePullPolicy})
	t.add(c+".terminationMessagePath", fixed("/dev/termination-log"))
	t.add(c+".terminationMessagePolicy", fixed("File"))
	t.add(c+".ports.[].protocol", fixed("TCP"))
	// With hostNetwork, every container port is a host port.
	t.add(c+".ports.[].hostPort", apiServerDefault{value: hostPort})
	t.add(c+".env.[].valueFrom.fieldRef.apiVersion", fixed("v1"))
	t.add(c+".env.[].valueFrom.fileKeyRef.optional", fixed(false))
	// A Quantity is never omitted: an unset divisor is stored as "0".
	t.add(c+".env.[].valueFrom.resourceFieldRef.divisor", fixed("0"))
	t.add(c+".resources", objectDefault)
	if requests {
		// A limit without its request: the request is the limit (SetDefaults_Pod).
		t.add(c+".resources.requests", objectDefault)
		t.add(c+".resources.requests.*", apiServerDefault{value: requestOfLimit})
	}
	for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		p := c + "." + probe
		t.add(p+".timeoutSeconds", fixed(1))
		t.add(p+".periodSeconds", fixed(10))
		t.add(p+".successThreshold", fixed(1))
		t.add(p+".failureThreshold", fixed(3))
		t.add(p+".grpc.service", fixed(""))
		t.httpGet(p)
	}
	for _, hook := range []string{"postStart", "preStop"} {
		t.httpGet(c + ".lifecycle." + hook)
	}
}

// volumes adds the defaults of the volumes at v.
func (t defaultsTable) volumes(v string) {
	t.add(v+".emptyDir", objectDefault) // a volume without a source
	t.add(v+".hostPath.type", fixed(""))
	for _, src := range []string{"secret", "configMap", "downwardAPI", "projected"} {
		t.add(v+"."+src+".defaultMode", fixed(420))
	}
	t.add(v+".downwardAPI.items.[].fieldRef.apiVersion", fixed("v1"))
	t.add(v+".projected.sources.[].downwardAPI.items.[].fieldRef.apiVersion", fixed("v1"))
	t.add(v+".downwardAPI.items.[].resourceFieldRef.divisor", fixed("0"))
	t.add(v+".projected.sources.[].downwardAPI.items.[].resourceFieldRef.divisor", fixed("0"))
	t.add(v+".projected.sources.[].serviceAccountToken.expirationSeconds", fixed(3600))
	t.add(v+".iscsi.iscsiInterface", fixed("default"))
	t.add(v+".rbd.pool", fixed("rbd"))
	t.add(v+".rbd.user", fixed("admin"))
	t.add(v+".rbd.keyring", fixed("/etc/ceph/keyring"))
	t.add(v+".azureDisk.cachingMode", fixed("ReadWrite"))
	t.add(v+".azureDisk.fsType", fixed("ext4"))
	t.add(v+".azureDisk.readOnly", fixed(false))
	t.add(v+".azureDisk.kind", fixed("Shared"))
	t.add(v+".scaleIO.storageMode", fixed("ThinProvisioned"))
	t.add(v+".scaleIO.fsType", fixed("xfs"))
	t.add(v+".ephemeral.volumeClaimTemplate.spec.volumeMode", fixed("Filesystem"))
	// An ObjectMeta is never omitted.
	t.add(v+".ephemeral.volumeClaimTemplate.metadata", objectDefault)
	t.add(v+".ephemeral.volumeClaimTemplate.metadata.creationTimestamp", fixed(nil))
	t.add(v+".image.pullPolicy", apiServerDefault{value: volumeImagePullPolicy})
}

// imagePullPolicy is a container's default pull policy: Always for the tag latest or none,
// else IfNotPresent (SetDefaults_Container, parsers.ParseImageName).
func imagePullPolicy(_ *comparison, container map[string]any) (any, bool) {
	image, _ := container["image"].(string)
	return pullPolicyOf(image), true
}

func volumeImagePullPolicy(_ *comparison, src map[string]any) (any, bool) {
	ref, _ := src["reference"].(string)
	return pullPolicyOf(ref), true
}

// pullPolicyOf is the default pull policy of an image reference.
func pullPolicyOf(image string) string {
	if _, digest, ok := strings.Cut(image, "@"); ok && digest != "" {
		image, _, _ = strings.Cut(image, "@")
		if tagOf(image) == "" {
			return "IfNotPresent" // by digest alone
		}
	}
	if tag := tagOf(image); tag == "" || tag == "latest" {
		return "Always"
	}
	return "IfNotPresent"
}

// tagOf is the tag of an image name without digest: after the last ':' that follows the last
// '/' (a registry's port comes before a '/').
func tagOf(image string) string {
	i := strings.LastIndexByte(image, ':')
	if i < 0 || i < strings.LastIndexByte(image, '/') {
		return ""
	}
	return image[i+1:]
}

// hostPort is a container port's default host port: its container port, on a Pod with
// hostNetwork.
func hostPort(c *comparison, port map[string]any) (any, bool) {
	if len(c.parents) == 0 {
		return nil, false
	}
	spec, _ := c.parents[0]["spec"].(map[string]any)
	if spec["hostNetwork"] != true {
		return nil, false
	}
	v, ok := port["containerPort"]
	return v, ok
}

// requestOfLimit is a container's default request of a resource: its limit.
func requestOfLimit(c *comparison, _ map[string]any) (any, bool) {
	n := len(c.parents)
	if n < 2 {
		return nil, false
	}
	limits, _ := c.parents[n-2]["limits"].(map[string]any)
	v, ok := limits[c.at[len(c.at)-1]]
	return v, ok
}

// targetPort is a Service port's default target port: its port.
func targetPort(_ *comparison, port map[string]any) (any, bool) {
	v, ok := port["port"]
	return v, ok
}
