package versions

// ProbePrefix is the name prefix (generateName) of the sample Pods: a probe's dry-run requests
// are recognisable in the API server's audit log by it.
const ProbePrefix = "podpatch-probe-"

// samples set each Pod field of Fields as a policy would (on the Pod and its one container);
// a new entry of Fields without a sample fails TestSampleForEveryField. The values are those
// TestVersionTable measured.
var samples = map[string]func(spec, container map[string]any){
	"spec.hostnameOverride": func(spec, _ map[string]any) { spec["hostnameOverride"] = "probe-host" },
	"spec.volumes[].image": func(spec, _ map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "iv", "image": map[string]any{"reference": "busybox:1", "pullPolicy": "IfNotPresent"}}}
	},
	"spec.containers[].restartPolicyRules": func(_, c map[string]any) {
		c["restartPolicy"] = "Never"
		c["restartPolicyRules"] = []any{map[string]any{"action": "Restart", "exitCodes": map[string]any{"operator": "In", "values": []any{int64(42)}}}}
	},
	"spec.containers[].lifecycle.stopSignal": func(spec, c map[string]any) {
		spec["os"] = map[string]any{"name": "linux"} // a stop signal needs the pod's OS
		c["lifecycle"] = map[string]any{"stopSignal": "SIGUSR1"}
	},
	"spec.containers[].env[].valueFrom.fileKeyRef": func(spec, c map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "ev", "emptyDir": map[string]any{}}}
		c["env"] = []any{map[string]any{"name": "A", "valueFrom": map[string]any{"fileKeyRef": map[string]any{"volumeName": "ev", "path": "p.env", "key": "k"}}}}
	},
}

// Sample is a Pod (a JSON tree: apiVersion, kind, metadata, spec) that sets f and nothing a
// version treats differently, for asking an API server what it does with f by a server-side
// dry-run (internal/references' probe, test/e2e's TestVersionTable). It carries no labels (no
// cluster manager's, so no podpatch webhook entry selects it), generateName ProbePrefix, no
// namespace, no service account token, and meets Pod Security `restricted`, so that a
// namespace enforcing it does not refuse the sample for another reason. False: f is not a Pod
// field of Fields.
func Sample(f Field) (map[string]any, bool) {
	set, ok := samples[f.Path]
	if !ok || f.Kind != "Pod" {
		return nil, false
	}
	container := map[string]any{
		"name": "probe", "image": "registry.k8s.io/pause:3.10",
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
