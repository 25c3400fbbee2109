package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/podpatch/podpatch/test/cluster"
)

// helmLabels are the labels the chart adds to manifests/' objects (Helm's standard labels);
// they are what legitimately differs between the two.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// TestChartMatchesKustomize holds the chart and the kustomize tree to one source of truth: with
// default values, release "podpatch" in namespace podpatch-system, each TLS mode renders
// exactly the objects of its overlay, field for field. Normalised: Helm's standard labels
// (in labels and selectors, a Service's too), and the Namespace, which the chart leaves to
// `helm install --create-namespace`.
func TestChartMatchesKustomize(t *testing.T) {
	for _, tc := range []struct{ mode, overlay string }{
		{"selfSigned", "manifests/overlays/self-signed"},
		{"certManager", "manifests/overlays/cert-manager"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r, err := renderChart(t, "podpatch", "podpatch-system", map[string]any{"tls": map[string]any{"mode": tc.mode}})
			require.NoError(t, err)
			built, err := cluster.Kustomize(filepath.Join(repoRoot, tc.overlay))
			require.NoError(t, err)
			var want []*unstructured.Unstructured
			for _, o := range built {
				if o.GetKind() != "Namespace" {
					want = append(want, o)
				}
			}
			requireSameObjects(t, want, r.objects)
		})
	}
	t.Run("examples", func(t *testing.T) {
		without, err := renderChart(t, "podpatch", "podpatch-system", nil)
		require.NoError(t, err)
		with, err := renderChart(t, "podpatch", "podpatch-system", map[string]any{"examples": map[string]any{"enabled": true}})
		require.NoError(t, err)
		base := map[string]bool{}
		for _, o := range without.objects {
			base[objectKey(o)] = true
		}
		var added []*unstructured.Unstructured
		for _, o := range with.objects {
			if !base[objectKey(o)] {
				added = append(added, o)
			}
		}
		built, err := cluster.Kustomize(filepath.Join(repoRoot, "manifests", "examples"))
		require.NoError(t, err)
		requireSameObjects(t, built, added)
	})
}

// TestChartMatchesComponents holds the chart's optional values to manifests/components: an
// overlay with a component renders the same objects as the chart with the value that stands
// for it, field for field (normalised as in TestChartMatchesKustomize).
func TestChartMatchesComponents(t *testing.T) {
	for _, tc := range []struct {
		name, mode, overlay string
		components          []string
		values              map[string]any
	}{
		{"network-policy", "selfSigned", "self-signed", []string{"network-policy"},
			map[string]any{"networkPolicy": map[string]any{"enabled": true}}},
		{"openreports", "selfSigned", "self-signed", []string{"openreports"},
			map[string]any{"audit": map[string]any{"interval": "10m"}}},
		{"external-urls-without-node-ports", "selfSigned", "self-signed", []string{"external-urls-without-node-ports"},
			map[string]any{"externalURLs": map[string]any{"nodePorts": false}}},
		// All of them, in the order the chart adds their flags.
		{"all/certManager", "certManager", "cert-manager", []string{"external-urls-without-node-ports", "openreports", "network-policy"},
			map[string]any{
				"externalURLs":  map[string]any{"nodePorts": false},
				"audit":         map[string]any{"interval": "10m"},
				"networkPolicy": map[string]any{"enabled": true},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			overlay := t.TempDir()
			kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n",
				relPath(t, overlay, filepath.Join("manifests", "overlays", tc.overlay)))
			for _, c := range tc.components {
				kustomization += "  - " + relPath(t, overlay, filepath.Join("manifests", "components", c)) + "\n"
			}
			require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644))
			built, err := cluster.Kustomize(overlay)
			require.NoError(t, err)
			var want []*unstructured.Unstructured
			for _, o := range built {
				if o.GetKind() != "Namespace" {
					want = append(want, o)
				}
			}
			tc.values["tls"] = map[string]any{"mode": tc.mode}
			r, err := renderChart(t, "podpatch", "podpatch-system", tc.values)
			require.NoError(t, err)
			requireSameObjects(t, want, r.objects)
		})
	}
}

// relPath is the path from dir to a directory of the repository: kustomize refuses absolute
// paths to kustomizations.
func relPath(t *testing.T, dir, repoDir string) string {
	t.Helper()
	rel, err := filepath.Rel(dir, filepath.Join(repoRoot, repoDir))
	require.NoError(t, err)
	return rel
}

// TestChartExamplesAreCopies checks that the chart's files/examples are byte for byte the
// files of manifests/examples (Helm reads only files inside the chart).
func TestChartExamplesAreCopies(t *testing.T) {
	requireCopies(t, exampleFiles(t), filepath.Join(chartDir, "files", "examples"),
		"cp manifests/examples/*.yaml (but kustomization.yaml) manifests/chart/podpatch/files/examples/")
}

// TestChartOpenReportsCRDsAreCopies checks that the CRDs the chart installs with audit.interval
// are byte for byte those of manifests/components/openreports.
func TestChartOpenReportsCRDsAreCopies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "manifests", "components", "openreports", "crd-*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	requireCopies(t, files, filepath.Join(chartDir, "files", "openreports"),
		"cp manifests/components/openreports/crd-*.yaml manifests/chart/podpatch/files/openreports/")
}

// requireCopies checks that dir holds a byte-for-byte copy of each of files and nothing else;
// fix says how to make it so.
func requireCopies(t *testing.T, files []string, dir, fix string) {
	t.Helper()
	copies, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.Len(t, copies, len(files), "%s has a copy of each of the files and nothing else: %s", dir, fix)
	for _, f := range files {
		want, err := os.ReadFile(f)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dir, filepath.Base(f)))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s differs from the chart's copy: %s", f, fix)
	}
}

// exampleFiles lists manifests/examples' policy files.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(repoRoot, "manifests", "examples", "*.yaml"))
	require.NoError(t, err)
	var out []string
	for _, f := range all {
		if filepath.Base(f) != "kustomization.yaml" {
			out = append(out, f)
		}
	}
	return out
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetAPIVersion() + " " + o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// requireSameObjects compares two sets of objects by identity and content, after normalising.
func requireSameObjects(t *testing.T, want, got []*unstructured.Unstructured) {
	t.Helper()
	index := func(objs []*unstructured.Unstructured) map[string]any {
		m := map[string]any{}
		for _, o := range objs {
			k := objectKey(o)
			require.NotContains(t, m, k, "duplicate object")
			m[k] = normalise(t, o)
		}
		return m
	}
	w, g := index(want), index(got)
	wantKeys, gotKeys := make([]string, 0, len(w)), make([]string, 0, len(g))
	for k := range w {
		wantKeys = append(wantKeys, k)
	}
	for k := range g {
		gotKeys = append(gotKeys, k)
	}
	require.ElementsMatch(t, wantKeys, gotKeys, "the same objects")
	for k, wv := range w {
		require.Equal(t, wv, g[k], k)
	}
}

// normalise returns the object as generic JSON without Helm's standard labels and its
// resource policy annotation, which only Helm reads.
func normalise(t *testing.T, o *unstructured.Unstructured) any {
	t.Helper()
	js, err := json.Marshal(o.Object)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(js, &v))
	var walk func(any)
	walk = func(n any) {
		switch n := n.(type) {
		case map[string]any:
			for k, child := range n {
				if labels, ok := child.(map[string]any); ok && (k == "labels" || k == "matchLabels" || k == "selector") {
					for _, l := range helmLabels {
						delete(labels, l)
					}
				}
				walk(child)
			}
		case []any:
			for _, child := range n {
				walk(child)
			}
		}
	}
	walk(v)
	if annotations, ok := v.(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any); ok {
		delete(annotations, "helm.sh/resource-policy")
	}
	return v
}
