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
	t := map[string]apiServerDefault{}
	add := func(path string, d apiServerDefault) { t[path] = d }
	httpGet := func(at string) {
		add(at+".httpGet.path", fixed("/"))
		add(at+".httpGet.scheme", fixed("HTTP"))
		// The H2CContainerProbe gate (alpha) writes the protocol.
		add(at+".httpGet.protocol", fixed("HTTP/1.1"))
	}
	for _, list := range containerListNames {
		c := "spec." + list + ".[]"
		add(c+".imagePullPolicy", apiServerDefault{value: imagePullPolicy})
		add(c+".terminationMessagePath", fixed("/dev/termination-log"))
		add(c+".terminationMessagePolicy", fixed("File"))
		add(c+".ports.[].protocol", fixed("TCP"))
		// With hostNetwork, every container port is a host port.
		add(c+".ports.[].hostPort", apiServerDefault{value: hostPort})
		add(c+".env.[].valueFrom.fieldRef.apiVersion", fixed("v1"))
		add(c+".env.[].valueFrom.fileKeyRef.optional", fixed(false))
		// A Quantity is never omitted: an unset divisor is stored as "0".
		add(c+".env.[].valueFrom.resourceFieldRef.divisor", fixed("0"))
		add(c+".resources", objectDefault)
		if list != "ephemeralContainers" {
			// A limit without its request: the request is the limit (SetDefaults_Pod).
			add(c+".resources.requests", objectDefault)
			add(c+".resources.requests.*", apiServerDefault{value: requestOfLimit})
		}
		for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
			p := c + "." + probe
			add(p+".timeoutSeconds", fixed(1))
			add(p+".periodSeconds", fixed(10))
			add(p+".successThreshold", fixed(1))
			add(p+".failureThreshold", fixed(3))
			add(p+".grpc.service", fixed(""))
			httpGet(p)
		}
		for _, hook := range []string{"postStart", "preStop"} {
			httpGet(c + ".lifecycle." + hook)
		}
	}
	v := "spec.volumes.[]"
	add(v+".emptyDir", objectDefault) // a volume without a source
	add(v+".hostPath.type", fixed(""))
	for _, src := range []string{"secret", "configMap", "downwardAPI", "projected"} {
		add(v+"."+src+".defaultMode", fixed(420))
	}
	add(v+".downwardAPI.items.[].fieldRef.apiVersion", fixed("v1"))
	add(v+".projected.sources.[].downwardAPI.items.[].fieldRef.apiVersion", fixed("v1"))
	add(v+".downwardAPI.items.[].resourceFieldRef.divisor", fixed("0"))
	add(v+".projected.sources.[].downwardAPI.items.[].resourceFieldRef.divisor", fixed("0"))
	add(v+".projected.sources.[].serviceAccountToken.expirationSeconds", fixed(3600))
	add(v+".iscsi.iscsiInterface", fixed("default"))
	add(v+".rbd.pool", fixed("rbd"))
	add(v+".rbd.user", fixed("admin"))
	add(v+".rbd.keyring", fixed("/etc/ceph/keyring"))
	add(v+".azureDisk.cachingMode", fixed("ReadWrite"))
	add(v+".azureDisk.fsType", fixed("ext4"))
	add(v+".azureDisk.readOnly", fixed(false))
	add(v+".azureDisk.kind", fixed("Shared"))
	add(v+".scaleIO.storageMode", fixed("ThinProvisioned"))
	add(v+".scaleIO.fsType", fixed("xfs"))
	add(v+".ephemeral.volumeClaimTemplate.spec.volumeMode", fixed("Filesystem"))
	// An ObjectMeta is never omitted.
	add(v+".ephemeral.volumeClaimTemplate.metadata", objectDefault)
	add(v+".ephemeral.volumeClaimTemplate.metadata.creationTimestamp", fixed(nil))
	add(v+".image.pullPolicy", apiServerDefault{value: volumeImagePullPolicy})
	// The Pod's own (SetDefaults_PodSpec), for a policy that removes one.
	add("spec.dnsPolicy", fixed("ClusterFirst"))
	add("spec.restartPolicy", fixed("Always"))
	add("spec.securityContext", objectDefault)
	add("spec.terminationGracePeriodSeconds", fixed(30))
	add("spec.schedulerName", fixed("default-scheduler"))
	add("spec.enableServiceLinks", fixed(true))
	// A Service's (SetDefaults_Service).
	add("spec.ports.[].protocol", fixed("TCP"))
	add("spec.ports.[].targetPort", apiServerDefault{value: targetPort})
	add("spec.sessionAffinity", fixed("None"))
	add("spec.type", fixed("ClusterIP"))
	add("spec.internalTrafficPolicy", fixed("Cluster"))
	add("spec.externalTrafficPolicy", fixed("Cluster"))
	add("spec.allocateLoadBalancerNodePorts", fixed(true))
	return t
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
