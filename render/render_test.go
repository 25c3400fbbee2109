package render

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policies/versions"
)

// platformSet compiles text, the policies of a platform ConfigMap's p.yaml, lint refusing none.
func platformSet(t *testing.T, configMap, text string) *policies.Set {
	t.Helper()
	ps, probs := policies.ParseConfigMap(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configMap, Namespace: policies.DefaultPlatformNamespace, Labels: map[string]string{policies.PolicyLabel: "true"}},
		Data:       map[string]string{"p.yaml": text},
	}, policies.DefaultOptions())
	require.Empty(t, probs)
	return policies.NewSet(ps)
}

// fixtureDocuments reads a manager fixture (policies/testdata/fixtures) as render reads a file.
func fixtureDocuments(t *testing.T, fixture string) []policies.RawDocument {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "policies", "testdata", "fixtures", fixture))
	require.NoError(t, err)
	js, err := yaml.YAMLToJSON(b)
	require.NoError(t, err)
	docs, err := policies.SplitDocuments(bytes.NewReader(js))
	require.NoError(t, err)
	return docs
}

// TestRenderExplainChecks: render --explain prints one "check:" line per finding, and the
// rendered object is the one without the comment lines.
func TestRenderExplainChecks(t *testing.T) {
	policy := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: p1}\nspec:\n" +
		"  match: {managers: [ray], roles: [worker]}\n  template:\n    spec:\n      containers:\n      - name: \"@main\"\n" +
		"        resources: {limits: {nvidia.com/gpu: \"1\", memory: 512Mi}, requests: {memory: 512Mi}}\n"
	set := platformSet(t, "hostile", policy)
	docs := fixtureDocuments(t, "kuberay/worker-pod.yaml")
	plain, err := Documents(set, docs, Options{Namespace: "default"})
	require.NoError(t, err)
	explained, err := Documents(set, docs, Options{Namespace: "default", Explain: true})
	require.NoError(t, err)
	var checks, rest []string
	for _, l := range strings.Split(string(explained), "\n") {
		switch {
		case strings.HasPrefix(l, "# podpatch:   check: "):
			checks = append(checks, strings.TrimPrefix(l, "# podpatch:   check: "))
		case !strings.HasPrefix(l, "# podpatch:"):
			rest = append(rest, l)
		}
	}
	in := policies.Input{Kind: profiles.KindPod, Object: docs[0].JSON, Namespace: "default"}
	res, err := set.Apply(in)
	require.NoError(t, err)
	pres, err := set.Patch(in)
	require.NoError(t, err)
	require.Equal(t, res.Findings, pres.Findings, "Patch (webhook) and Apply (render) must find the same")
	require.Len(t, res.Findings, 2)
	require.Equal(t, []string{res.Findings[0].String(), res.Findings[1].String()}, checks)
	require.Equal(t, string(plain), strings.Join(rest, "\n"))
}

// TestRenderForKubeVersion: render --kube-version renders as a cluster of that version admits:
// the policy of a field it refuses is left out, one it drops is said (no effect); without a
// version nothing is checked.
func TestRenderForKubeVersion(t *testing.T) {
	policy := "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: host}\nspec:\n  template: {spec: {hostnameOverride: h}}\n---\n" +
		"apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: env}\nspec:\n  template: {spec: {volumes: [{name: ev, emptyDir: {}}], " +
		"containers: [{name: '@main', env: [{name: A, valueFrom: {fileKeyRef: {volumeName: ev, path: p, key: k}}}]}]}}\n"
	set := platformSet(t, "v", policy)
	docs := fixtureDocuments(t, "dask-operator/worker-pod.yaml")
	render := func(v *versions.Version) string {
		out, err := Documents(set, docs, Options{Namespace: "default", Explain: true, KubeVersion: v})
		require.NoError(t, err)
		return string(out)
	}
	old := render(&versions.Version{Minor: 34})
	require.Contains(t, old, "# podpatch:   no effect: policy podpatch-system/v/host: spec.hostnameOverride has no effect on Kubernetes 1.34")
	require.Contains(t, old, "# podpatch:   left out: podpatch-system/v/env (platform merge): spec.containers[@main].env[A].valueFrom.fileKeyRef: makes Kubernetes 1.34 refuse the object")
	require.NotContains(t, old, "fileKeyRef:\n", "the refused field is not rendered")
	for _, v := range []*versions.Version{{Minor: 35}, nil} {
		out := render(v)
		require.NotContains(t, out, "no effect:")
		require.NotContains(t, out, "left out:")
		require.Contains(t, out, "fileKeyRef")
	}
}
