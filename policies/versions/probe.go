package versions

import "slices"

// ProbePrefix is the name prefix (generateName) of the sample Pods: a probe's dry-run requests
// are recognisable in the API server's audit log by it.
const ProbePrefix = "podpatch-probe-"

// samples set each field of Fields as a policy would (on the Pod and its one container; for
// a Service field, on the Service's spec and container nil); a new entry of Fields without a
// sample fails TestSampleForEveryField. The values are those TestVersionTable measured.
var samples = map[string]func(spec, container map[string]any){
	"spec.resources": func(spec, _ map[string]any) {
		spec["resources"] = map[string]any{"limits": map[string]any{"cpu": "8", "memory": "32Gi"}} // above what a manager's main container asks
	},
	"spec.resourceClaims": func(spec, _ map[string]any) {
		spec["resourceClaims"] = []any{map[string]any{"name": "gpu", "resourceClaimName": "claim"}}
	},
	"spec.containers[].resources.claims": func(spec, c map[string]any) {
		spec["resourceClaims"] = []any{map[string]any{"name": "gpu", "resourceClaimName": "claim"}}
		c["resources"] = map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}
	},
	"spec.hostnameOverride": func(spec, _ map[string]any) { spec["hostnameOverride"] = "probe-host" },
	"spec.volumes[].image": func(spec, _ map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "iv", "image": map[string]any{"reference": "busybox:1", "pullPolicy": "IfNotPresent"}}}
	},
	"spec.containers[].restartPolicyRules": func(_, c map[string]any) {
		c["restartPolicy"] = "Never"
		c["restartPolicyRules"] = []any{map[string]any{"action": "Restart", "exitCodes": map[string]any{"operator": "In", "values": []any{int64(42)}}}}
	},
	"spec.containers[].restartPolicy": func(_, c map[string]any) { c["restartPolicy"] = "Never" },
	"spec.initContainers[].env[].valueFrom.fileKeyRef": func(spec, c map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "ev", "emptyDir": map[string]any{}}}
		init := map[string]any{"name": "init", "image": probeImage}
		if sc, ok := c["securityContext"]; ok {
			init["securityContext"] = sc // what Pod Security asks of every container
		}
		init["env"] = []any{map[string]any{"name": "A", "valueFrom": map[string]any{"fileKeyRef": map[string]any{"volumeName": "ev", "path": "p.env", "key": "k"}}}}
		spec["initContainers"] = []any{init}
	},
	"spec.securityContext.seLinuxChangePolicy": func(spec, _ map[string]any) {
		sc, _ := spec["securityContext"].(map[string]any)
		if sc == nil {
			sc = map[string]any{}
			spec["securityContext"] = sc
		}
		sc["seLinuxChangePolicy"] = "MountOption"
	},
	"spec.containers[].env[].valueFrom.fileKeyRef": func(spec, c map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "ev", "emptyDir": map[string]any{}}}
		c["env"] = []any{map[string]any{"name": "A", "valueFrom": map[string]any{"fileKeyRef": map[string]any{"volumeName": "ev", "path": "p.env", "key": "k"}}}}
	},
	"spec.volumes[].projected.sources[].clusterTrustBundle": func(spec, _ map[string]any) {
		spec["volumes"] = []any{projected(nil, map[string]any{"clusterTrustBundle": map[string]any{"name": "bundle", "path": "ca.pem"}})}
	},
	"spec.volumes[].projected.sources[].podCertificate": func(spec, _ map[string]any) {
		spec["volumes"] = []any{projected(nil, map[string]any{"podCertificate": map[string]any{"signerName": "example.com/signer", "keyType": "ED25519", "credentialBundlePath": "creds.pem"}})}
	},
	"spec.containers[].lifecycle.stopSignal": func(spec, c map[string]any) {
		spec["os"] = map[string]any{"name": "linux"} // a stop signal needs the pod's OS
		c["lifecycle"] = map[string]any{"stopSignal": "SIGUSR1"}
	},
	"spec.volumes[].emptyDir.mode": func(spec, _ map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "ed", "emptyDir": map[string]any{"mode": int64(0o750)}}}
	},
	"spec.containers[].volumeMounts[].bindMountOptions": func(spec, c map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "ed", "emptyDir": map[string]any{}}}
		c["volumeMounts"] = []any{map[string]any{"name": "ed", "mountPath": "/scratch", "bindMountOptions": []any{"noexec"}}}
	},
	"spec.volumes[].secret.defaultUser": func(spec, _ map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "s", "secret": map[string]any{"secretName": "s", "defaultUser": int64(1000)}}}
	},
	"spec.volumes[].configMap.defaultUser": func(spec, _ map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "cm", "configMap": map[string]any{"name": "cm", "defaultUser": int64(1000)}}}
	},
	"spec.volumes[].downwardAPI.defaultUser": func(spec, _ map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "d", "downwardAPI": map[string]any{"defaultUser": int64(1000),
			"items": []any{map[string]any{"path": "labels", "fieldRef": map[string]any{"fieldPath": "metadata.labels"}}}}}}
	},
	"spec.volumes[].projected.defaultUser": func(spec, _ map[string]any) {
		spec["volumes"] = []any{projected(map[string]any{"defaultUser": int64(1000)}, map[string]any{"configMap": map[string]any{"name": "cm"}})}
	},
	"spec.volumes[].projected.sources[].serviceAccountToken.user": func(spec, _ map[string]any) {
		spec["serviceAccountName"] = "default" // a token needs the pod's ServiceAccount
		spec["volumes"] = []any{projected(nil, map[string]any{"serviceAccountToken": map[string]any{"path": "token", "user": int64(1000)}})}
	},
	"spec.containers[].livenessProbe.httpGet.protocol":  probeWith("livenessProbe", "httpGet", "protocol", "HTTP2"),
	"spec.containers[].readinessProbe.httpGet.protocol": probeWith("readinessProbe", "httpGet", "protocol", "HTTP2"),
	"spec.containers[].startupProbe.httpGet.protocol":   probeWith("startupProbe", "httpGet", "protocol", "HTTP2"),
	"spec.containers[].livenessProbe.grpc.mode":         probeWith("livenessProbe", "grpc", "mode", "TLS"),
	"spec.containers[].readinessProbe.grpc.mode":        probeWith("readinessProbe", "grpc", "mode", "TLS"),
	"spec.containers[].startupProbe.grpc.mode":          probeWith("startupProbe", "grpc", "mode", "TLS"),
	"spec.schedulingGroup": func(spec, _ map[string]any) {
		spec["schedulingGroup"] = map[string]any{"podGroupName": "group"}
	},
	"spec.evictionResponders": func(spec, _ map[string]any) {
		spec["evictionResponders"] = []any{map[string]any{"name": "example.com/responder", "priority": int64(1000)}}
	},
	"spec.trafficDistribution": func(spec, _ map[string]any) { spec["trafficDistribution"] = "PreferSameZone" },
}

// projected is a projected volume with one source and the volume's own fields.
func projected(fields, source map[string]any) map[string]any {
	p := map[string]any{"sources": []any{source}}
	for k, v := range fields {
		p[k] = v
	}
	return map[string]any{"name": "pv", "projected": p}
}

// probeWith sets a container's probe of the given handler, with one gated field.
func probeWith(which, handler, key, value string) func(_, c map[string]any) {
	return func(_, c map[string]any) {
		c[which] = map[string]any{handler: map[string]any{"port": int64(8080), key: value}}
	}
}

// probeImage is the samples' containers' image.
const probeImage = "registry.k8s.io/pause:3.10"

// PolicySpec is f's sample as a platform policy sets it: the spec of its template (a Pod
// field; the sample's one container is the manager's main one, "@main") or of its service
// part, without what the sample carries only to be a whole Pod (an image, Pod Security's
// settings, no token). False: f is not a field of Fields.
func PolicySpec(f Field) (map[string]any, bool) {
	set, ok := samples[f.Path]
	if !ok || !slices.ContainsFunc(Fields, func(g Field) bool { return g.Kind == f.Kind && g.Path == f.Path }) {
		return nil, false
	}
	spec := map[string]any{}
	if f.Kind == "Service" {
		set(spec, nil)
		return spec, true
	}
	main := map[string]any{"name": "@main"}
	set(spec, main)
	if len(main) > 1 {
		spec["containers"] = []any{main}
	}
	return spec, true
}

// Sample is a Pod (a JSON tree: apiVersion, kind, metadata, spec) that sets f and nothing a
// version treats differently, for asking an API server what it does with f by a server-side
// dry-run (internal/references' probe, test/e2e's TestVersionTable). It carries no labels (no
// cluster manager's, so no podpatch webhook entry selects it), generateName ProbePrefix, no
// namespace, no service account token, and meets Pod Security `restricted`, so that a
// namespace enforcing it does not refuse the sample for another reason. For a Service field,
// a ClusterIP Service with one port. False: f is not a field of Fields.
func Sample(f Field) (map[string]any, bool) {
	set, ok := samples[f.Path]
	if !ok || !slices.ContainsFunc(Fields, func(g Field) bool { return g.Kind == f.Kind && g.Path == f.Path }) {
		return nil, false
	}
	if f.Kind == "Service" {
		spec := map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}
		set(spec, nil)
		return map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"generateName": ProbePrefix}, "spec": spec}, true
	}
	container := map[string]any{
		"name": "probe", "image": probeImage,
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"capabilities":             map[string]any{"drop": []any{"ALL"}},
		},
	}
	spec := map[string]any{
		"automountServiceAccountToken": false,
		"securityContext": map[string]any{
			"runAsNonRoot":   true,
			"runAsUser":      int64(65534),
			"seccompProfile": map[string]any{"type": "RuntimeDefault"},
		},
		"containers": []any{container},
	}
	set(spec, container)
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"generateName": ProbePrefix},
		"spec":       spec,
	}, true
}
