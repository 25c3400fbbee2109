package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/test/cluster"
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
	v, err := references.ServerVersionOf(info) // under --emulated-version, the emulated one
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
			want := f.At(v)
			if gatesOn(os.Getenv(cluster.APIServerFlagsEnv))(f.Gate) {
				want = versions.Kept // the lane turned its gate on (the matrix's alpha-gates lane)
			}
			require.Equal(t, want.String(), got.String(), "%s on Kubernetes %s, feature gate %s (err: %v)", f.Path, v, f.Gate, err)
		})
	}
}

// gatesOn reads the feature gates a lane's kube-apiserver flags (cluster.APIServerFlagsEnv,
// `;`-separated) turn on, and answers whether a gate is on: named `feature-gates=G=true`, or
// every gate off by default under both AllAlpha=true and AllBeta=true (a field versions.Fields
// does not keep by default has its gate off by default: alpha, or a beta off by default).
// versions.Fields says what each version does with its DEFAULT gates; under a gate turned on,
// the API server keeps the field.
func gatesOn(flags string) func(gate string) bool {
	on := map[string]bool{}
	for _, f := range strings.Split(flags, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		if strings.TrimLeft(k, "-") != "feature-gates" {
			continue
		}
		for _, g := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(g), "=")
			on[name] = strings.EqualFold(strings.TrimSpace(val), "true")
		}
	}
	all := on["AllAlpha"] && on["AllBeta"]
	return func(gate string) bool {
		if set, ok := on[gate]; ok {
			return set
		}
		return all
	}
}

// versionPolicies set each field of versions.Fields through a merge policy (the template's
// spec, YAML); a new entry without one fails TestFieldsNeverClaimed.
var versionPolicies = map[string]string{
	"spec.hostnameOverride":                        "{hostnameOverride: probe-host}",
	"spec.volumes[].image":                         "{volumes: [{name: iv, image: {reference: 'busybox:1', pullPolicy: IfNotPresent}}]}",
	"spec.containers[].restartPolicyRules":         "{containers: [{name: '@main', restartPolicy: Never, restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]}]}",
	"spec.containers[].lifecycle.stopSignal":       "{os: {name: linux}, containers: [{name: '@main', lifecycle: {stopSignal: SIGUSR1}}]}",
	"spec.containers[].env[].valueFrom.fileKeyRef": "{volumes: [{name: ev, emptyDir: {}}], containers: [{name: '@main', env: [{name: A, valueFrom: {fileKeyRef: {volumeName: ev, path: p.env, key: k}}}]}]}",
}

// TestFieldsNeverClaimed is issue 34's field-drop test through podpatch and the API server the
// tests run: each field of versions.Fields, set by a platform policy on a Dask worker, is
// stored (the version keeps it), or the admission warning says it has no effect on this
// version (dropped), or the policy is left out naming the version (refused) — never claimed
// applied and silently dropped.
func TestFieldsNeverClaimed(t *testing.T) {
	ctx := contextBackground()
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	require.NoError(t, err)
	info, err := dc.ServerVersion()
	require.NoError(t, err)
	v, err := references.ServerVersionOf(info)
	require.NoError(t, err)

	certDir, ca := servingCerts(t)
	p := startPodpatch(t, certDir)
	mwc, vwc := webhookConfigurations(t, kustomizeBuild(t, "manifests/base"), p.url(), ca)
	installWebhooks(t, mwc, vwc)
	c, w := warnedClient(t)

	for i, f := range versions.Fields {
		t.Run(f.Path, func(t *testing.T) {
			spec, ok := versionPolicies[f.Path]
			require.True(t, ok, "no policy for %s", f.Path)
			name := fmt.Sprintf("e2e-version-%d", i)
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: policies.DefaultPlatformNamespace, Name: name, Labels: map[string]string{policies.PolicyLabel: "true"}},
				Data: map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: field}\nspec:\n" +
					"  match: {managers: [dask], clusters: [" + name + "]}\n  template: {spec: " + spec + "}\n"},
			}
			require.NoError(t, k8s.Create(ctx, cm))
			t.Cleanup(func() { _ = k8s.Delete(contextBackground(), cm) })
			ref := policies.DefaultPlatformNamespace + "/" + name + "/field"
			var stored *unstructured.Unstructured
			var warnings []string
			require.Eventually(t, func() bool {
				u := readObject(t, "policies/testdata/fixtures/dask-operator/worker-pod.yaml")
				meta := u.Object["metadata"].(map[string]any)
				delete(meta, "ownerReferences")
				meta["labels"].(map[string]any)["dask.org/cluster-name"] = name
				w.take()
				require.NoError(t, c.Create(ctx, u, client.DryRunAll))
				stored, warnings = u, w.take()
				// Served once the policy is named: in the provenance, or in a warning.
				return strings.Contains(u.GetAnnotations()[policies.AppliedAnnotation], ref) || strings.Contains(strings.Join(warnings, "\n"), ref)
			}, 30*time.Second, 200*time.Millisecond, "podpatch serves %s", ref)
			_, set := versions.Find(stored.Object, f.Path)
			all := strings.Join(warnings, "\n")
			switch f.At(v) {
			case versions.Kept:
				require.True(t, set, "Kubernetes %s keeps %s", v, f.Path)
				require.NotContains(t, all, ref)
			case versions.Dropped:
				require.False(t, set)
				require.Contains(t, all, "policy "+ref+"@", "the warning names the policy")
				require.Contains(t, all, "has no effect on Kubernetes "+v.String()+": feature gate "+f.Gate)
			case versions.Refused:
				require.False(t, set)
				require.NotContains(t, withoutVersions(t, stored.GetAnnotations()[policies.AppliedAnnotation]), ref, "left out, not claimed")
				require.Contains(t, all, "policy "+ref+"@")
				require.Contains(t, all, "("+validity.RuleKubeVersion+")")
			}
		})
	}
}
