package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies/versions"
	"github.com/podpatch/podpatch/preview"
)

// versionPolicy is a platform policy ConfigMap whose fields Kubernetes versions treat
// differently: hostnameOverride (dropped before 1.35), stopSignal (dropped by every supported
// version) and a fileKeyRef (refused before 1.35).
const versionPolicy = `apiVersion: v1
kind: ConfigMap
metadata:
  name: fields
  namespace: podpatch-system
  labels: {podpatch.io/policy: "true"}
data:
  p.yaml: |
    apiVersion: podpatch.io/v1alpha1
    kind: PodTemplatePatch
    metadata: {name: fields}
    spec:
      match: {roles: [worker]}
      template:
        spec:
          hostnameOverride: worker
          os: {name: linux}
          volumes: [{name: ev, emptyDir: {}}]
          containers:
            - name: "@main"
              lifecycle: {stopSignal: SIGUSR1}
              env: [{name: A, valueFrom: {fileKeyRef: {volumeName: ev, path: p.env, key: k}}}]
`

// TestDiffKubeVersion: `podpatch diff` reports the fields a policy change sets that the
// version drops ("! no effect"), and leaves out (exit 4) a policy the version refuses.
func TestDiffKubeVersion(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "fields.yaml", versionPolicy)
	run := func(kube string) *preview.Object {
		args := []string{"diff", "--base", examples, "--policies", dir, "-f", daskWorker, "-o", "json"}
		if kube != "" {
			args = append(args, "--kube-version", kube)
		}
		r := podpatch(t, "", args...)
		rep := &preview.Report{}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), rep), r.stderr)
		require.Len(t, rep.Groups, 1, r.stdout)
		require.Len(t, rep.Groups[0].Objects, 1)
		o := rep.Groups[0].Objects[0]
		want := 3
		if o.Breaks {
			want = 4
		}
		require.Equal(t, want, r.code, r.stderr)
		return &o
	}
	newest := run("") // without a cluster: the newest supported version
	require.False(t, newest.Breaks)
	require.Len(t, newest.NoEffect, 1, "stopSignal, alpha on 1.37")
	require.Contains(t, newest.NoEffect[0], "podpatch-system/fields/fields")
	require.Contains(t, newest.NoEffect[0], "lifecycle.stopSignal has no effect on Kubernetes 1.37: feature gate ContainerStopSignals")

	old := run("1.34")
	require.True(t, old.Breaks, "1.34 refuses the fileKeyRef: the policy is left out")
	require.Len(t, old.LeftOut, 1)
	require.Contains(t, old.LeftOut[0], "makes Kubernetes 1.34 refuse the object: feature gate EnvFiles is off there (kube-version)")
	require.Empty(t, old.NoEffect, "a policy left out has no fields without effect")

	text := podpatch(t, "", "diff", "--base", examples, "--policies", dir, "-f", daskWorker)
	require.Contains(t, text.stdout, "! no effect: podpatch-system/fields/fields")

	bad := podpatch(t, "", "diff", "--base", examples, "--policies", dir, "-f", daskWorker, "--kube-version", "1.31")
	require.Equal(t, 2, bad.code)
	require.Contains(t, bad.stderr, "podpatch supports Kubernetes 1.33 to 1.37")
}

// TestCheckKubeVersion: `podpatch check` says the cluster's version and whether podpatch
// supports it, warns of the fields its policy ConfigMaps set that the version drops or
// refuses, and fails on refusals at an explicit --kube-version (an upgrade's plan).
func TestCheckKubeVersion(t *testing.T) {
	cm := &corev1.ConfigMap{}
	require.NoError(t, yaml.Unmarshal([]byte(versionPolicy), cm))
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-a-policy", Namespace: "default"}, Data: map[string]string{"p.yaml": "x: ["}}
	client := func(gitVersion, minor string) *fake.Clientset {
		c := fake.NewClientset(cm, other)
		c.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &k8sversion.Info{Major: "1", Minor: minor, GitVersion: gitVersion}
		return c
	}
	ctx := context.Background()

	var out bytes.Buffer
	require.NoError(t, checkKubeVersion(ctx, client("v1.37.2", "37"), nil, &out))
	require.Contains(t, out.String(), "ok: Kubernetes 1.37 (v1.37.2), supported (1.33 to 1.37)")
	require.Contains(t, out.String(), "warning: podpatch-system/fields/fields: spec.containers[@main].lifecycle.stopSignal: has no effect on Kubernetes 1.37")
	require.Contains(t, out.String(), "ok: the 1 policy ConfigMap(s) checked for Kubernetes 1.37 (1 field(s) without effect, 0 refused)")

	out.Reset()
	require.NoError(t, checkKubeVersion(ctx, client("v1.34.4", "34"), nil, &out), "the live version's refusals are warned")
	require.Contains(t, out.String(), "makes Kubernetes 1.34 refuse the object: feature gate EnvFiles")

	out.Reset()
	v34 := versions.Version{Minor: 34}
	err := checkKubeVersion(ctx, client("v1.37.2", "37"), &v34, &out)
	require.ErrorContains(t, err, "1 field(s) the cluster's policies set are refused by Kubernetes 1.34")

	out.Reset()
	require.NoError(t, checkKubeVersion(ctx, client("v1.38.0-beta.0", "38"), nil, &out))
	require.Contains(t, out.String(), "warning: Kubernetes 1.38 (v1.38.0-beta.0) is not supported by podpatch (1.33 to 1.37): it checks no version's fields")
	require.NotContains(t, out.String(), "policy ConfigMap(s) checked")

	emulated := client("v1.37.2", "37")
	emulated.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion.EmulationMajor = "1"
	emulated.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion.EmulationMinor = "34"
	out.Reset()
	require.NoError(t, checkKubeVersion(ctx, emulated, nil, &out))
	require.Contains(t, out.String(), "ok: Kubernetes 1.34 (v1.37.2)", "under --emulated-version, the emulated one")
}
