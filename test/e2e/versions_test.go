package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/policies/versions"
)

// versionSamples set each field of versions.Fields on a Pod, as a policy would; a new entry
// without a sample fails TestVersionTable.
var versionSamples = map[string]func(spec, container map[string]any){
	"spec.hostnameOverride": func(spec, _ map[string]any) { spec["hostnameOverride"] = "probe-host" },
	"spec.volumes[].image": func(spec, _ map[string]any) {
		spec["volumes"] = []any{map[string]any{"name": "iv", "image": map[string]any{"reference": "busybox:1", "pullPolicy": "IfNotPresent"}}}
	},
	"spec.containers[].restartPolicyRules": func(_, c map[string]any) {
		c["restartPolicy"] = "Never"
		c["restartPolicyRules"] = []any{map[string]any{"action": "Restart", "exitCodes": map[string]any{"operator": "In", "values": []any{42}}}}
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

// TestVersionTable checks every entry of versions.Fields against the API server the tests run
// (its emulated version under PODPATCH_APISERVER_FLAGS="emulated-version=1.3x", the matrix's
// lanes): a Pod with the field set is stored with it (kept), without it (dropped) or refused,
// exactly as the table says for that version.
func TestVersionTable(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	require.NoError(t, err)
	info, err := dc.ServerVersion()
	require.NoError(t, err)
	minor := info.Minor
	if info.EmulationMinor != "" { // --emulated-version: the binary's version stays in Minor
		minor = info.EmulationMinor
	}
	v, err := versions.Parse(info.Major + "." + minor)
	require.NoError(t, err)
	require.True(t, v.Supported(), "the test control plane runs a supported version: %+v", info)
	t.Logf("Kubernetes %s (binary %s)", v, info.GitVersion)
	for _, f := range versions.Fields {
		t.Run(f.Path, func(t *testing.T) {
			sample, ok := versionSamples[f.Path]
			require.True(t, ok, "no sample for %s", f.Path)
			container := map[string]any{"name": "c", "image": "x"}
			spec := map[string]any{"containers": []any{container}}
			sample(spec, container)
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "version-probe", "namespace": "default"}, "spec": spec}}
			err := k8s.Create(contextBackground(), u, client.DryRunAll)
			got := versions.Kept
			switch {
			case err != nil:
				require.True(t, apierrors.IsInvalid(err), "refused as invalid, not for another reason: %v", err)
				got = versions.Refused
			default:
				if _, set := versions.Find(u.Object, f.Path); !set {
					got = versions.Dropped
				}
			}
			require.Equal(t, f.At(v).String(), got.String(), "%s on Kubernetes %s (err: %v)", f.Path, v, err)
		})
	}
}
