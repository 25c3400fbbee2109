package e2e

import (
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/podpatch/podpatch/explain"
	"github.com/podpatch/podpatch/internal/references"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/validity"
	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/test/cluster"
)

// testKubeVersion is the Kubernetes version the test API server serves (under
// --emulated-version, the emulated one), and its /version answer.
func testKubeVersion(t *testing.T) (versions.Version, *version.Info) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(restConfig)
	require.NoError(t, err)
	info, err := dc.ServerVersion()
	require.NoError(t, err)
	v, err := references.ServerVersionOf(info)
	require.NoError(t, err)
	return v, info
}

// skipDroppedHere skips an oracle row whose object sets a field of versions.Fields that the
// test API server's version drops (the 1.33 lane: pod-level resources, projections): the
// server accepts any value there, while podpatch holds the field to the versions that keep it.
func skipDroppedHere(t *testing.T, v versions.Version, kind string, obj map[string]any) {
	t.Helper()
	on := gatesOn(os.Getenv(cluster.APIServerFlagsEnv))
	for _, f := range versions.Fields {
		if f.Kind == kind && f.At(v) == versions.Dropped && !on(f.Gate) && f.Set(obj) {
			t.Skipf("Kubernetes %s drops %s: its validation is not this server's", v, f.Path)
		}
	}
}

// TestVersionTable checks every entry of versions.Fields against the API server the tests run
// (its emulated version under PODPATCH_APISERVER_FLAGS="emulated-version=1.3x", the matrix's
// lanes): a Pod with the field set is stored with it (kept), without it (dropped) or refused,
// exactly as the table says for that version.
func TestVersionTable(t *testing.T) {
	v, info := testKubeVersion(t)
	require.True(t, v.Supported(), "the test control plane runs a supported version: %+v", info)
	t.Logf("Kubernetes %s (binary %s)", v, info.GitVersion)
	for _, f := range versions.Fields {
		t.Run(f.Path, func(t *testing.T) {
			got, err := measureField(t, f)
			want := f.At(v)
			if gatesOn(os.Getenv(cluster.APIServerFlagsEnv))(f.Gate) {
				want = versions.Kept // the lane turned its gate on (the matrix's alpha-gates lane)
			}
			require.Equal(t, want.String(), got.String(), "%s on Kubernetes %s, feature gate %s (err: %v)", f.Path, v, f.Gate, err)
		})
	}
}

// measureField asks the test API server what it does with f: a dry-run create of the Pod
// podpatch's probe asks about (versions.Sample, internal/references), stored with the field
// (kept), without it (dropped), or refused as invalid (and the error).
func measureField(t *testing.T, f versions.Field) (versions.Outcome, error) {
	t.Helper()
	sample, ok := versions.Sample(f)
	require.True(t, ok, "no sample for %s", f.Path)
	u := &unstructured.Unstructured{Object: sample}
	u.SetNamespace("default")
	err := k8s.Create(contextBackground(), u, client.DryRunAll)
	switch {
	case err != nil:
		require.True(t, apierrors.IsInvalid(err), "refused as invalid, not for another reason: %v", err)
		return versions.Refused, err
	default:
		if !f.Set(u.Object) {
			return versions.Dropped, nil
		}
	}
	return versions.Kept, nil
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

// TestFieldsNeverClaimed is the version-dependent field-drop test through podpatch and the API server the
// tests run: each field of versions.Fields, set by a platform policy on a Dask worker (a Service field: on a Ray head Service), is
// stored (the version keeps it), or the admission warning says it has no effect on this
// version (dropped), or the policy is left out naming the version (refused) — never claimed
// applied and silently dropped.
func TestFieldsNeverClaimed(t *testing.T) {
	ctx := contextBackground()
	v, _ := testKubeVersion(t)

	p := servePodpatch(t)
	c, w := warnedClient(t)
	// Until its probe has asked the API server, podpatch serves the version's table: wait for
	// what it learned, which a lane with other gates (alpha) needs.
	// The gauge is set when a run has ended (a field it could not learn, such as 1.33's
	// restartPolicyRules refused for the restartPolicy they need, is the table's).
	require.Eventually(t, func() bool {
		sources, err := p.MetricLabels("podpatch_kube_field_outcome", "source")
		return err == nil && len(sources) == len(versions.Fields)
	}, time.Minute, 100*time.Millisecond, "podpatch's probe ran")

	for i, f := range versions.Fields {
		t.Run(f.Path, func(t *testing.T) {
			if f.Path == "spec.volumes[].projected.sources[].serviceAccountToken.user" {
				sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default"}}
				if err := k8s.Create(ctx, sa); !apierrors.IsAlreadyExists(err) {
					require.NoError(t, err, "the token's ServiceAccount (no controller manager makes it here)")
				}
			}
			stored, all, ref := servedField(t, k8s, c, w, f, fmt.Sprintf("e2e-version-%d", i))
			set := f.Set(stored.Object)
			// What this API server does with the field (its gates may differ from the
			// version's defaults, in the gates lane): podpatch must say just that.
			want, _ := measureField(t, f)
			switch want {
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
				require.Contains(t, all, "("+validity.ReasonKubeVersion+")")
			}
		})
	}
}

// TestExplainKubeVersion: `podpatch explain` on a live worker Pod reports what the cluster's
// version (read by discovery) drops of a platform policy's fields, and with --kube-version 1.34
// that the policy is left out because that version refuses one of them.
func TestExplainKubeVersion(t *testing.T) {
	ctx := contextBackground()
	v, _ := testKubeVersion(t)
	if v.Minor < 35 {
		t.Skipf("the policy's fileKeyRef is refused by Kubernetes %s itself", v)
	}
	createPolicies(t, policies.DefaultPlatformNamespace, "e2e-explain-version", map[string]string{"p.yaml": "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: fields}\nspec:\n" +
		"  match: {managers: [dask], clusters: [explain-version]}\n  template: {spec: " +
		"{os: {name: linux}, volumes: [{name: ev, emptyDir: {}}], containers: [{name: '@main', lifecycle: {stopSignal: SIGUSR1}, " +
		"env: [{name: A, valueFrom: {fileKeyRef: {volumeName: ev, path: p.env, key: k}}}]}]}}\n"})
	u := readObject(t, "policies/testdata/fixtures/dask-operator/worker-pod.yaml")
	meta := u.Object["metadata"].(map[string]any)
	delete(meta, "ownerReferences")
	delete(meta, "generateName")
	meta["name"] = "explain-version-worker"
	meta["labels"].(map[string]any)["dask.org/cluster-name"] = "explain-version"
	require.NoError(t, k8s.Create(ctx, u))
	t.Cleanup(func() { _ = k8s.Delete(contextBackground(), u) })

	explainPod := func(args ...string) explain.Object {
		run := runCommand(t, append([]string{"explain", "--kubeconfig", kubeconfig, "-n", "default", "pod/explain-version-worker", "-o", "json"}, args...)...)
		require.Equal(t, 0, run.code, run.stderr)
		rep := &explain.Report{}
		require.NoError(t, json.Unmarshal([]byte(run.stdout), rep), run.stdout)
		require.Len(t, rep.Objects, 1)
		return rep.Objects[0]
	}
	ref := policies.DefaultPlatformNamespace + "/e2e-explain-version/fields"
	live := explainPod()
	require.Empty(t, live.Skipped)
	require.Len(t, live.NoEffect, 1, "stopSignal: its gate is alpha on Kubernetes %s", v)
	require.True(t, strings.HasPrefix(live.NoEffect[0].Policy, ref+"@"), live.NoEffect[0].Policy)
	require.Equal(t, "ContainerStopSignals", live.NoEffect[0].Gate)
	require.Contains(t, live.NoEffect[0].Message, "has no effect on Kubernetes "+v.String())

	old := explainPod("--kube-version", "1.34")
	require.Len(t, old.Skipped, 1)
	require.Equal(t, validity.ReasonKubeVersion, old.Skipped[0].Rule)
	require.Contains(t, old.Skipped[0].Message, "makes Kubernetes 1.34 refuse the object: feature gate EnvFiles")
}
