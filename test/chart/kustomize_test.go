package chart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

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
		// The NetworkPolicy is in the base, on by default; the component that used to add it
		// is kept, empty, and the chart's default stands for it.
		{"network-policy", "selfSigned", "self-signed", []string{"network-policy"},
			map[string]any{"networkPolicy": map[string]any{"enabled": true}}},
		{"without-network-policy", "selfSigned", "self-signed", []string{"without-network-policy"},
			map[string]any{"networkPolicy": map[string]any{"enabled": false}}},
		{"openreports", "selfSigned", "self-signed", []string{"openreports"},
			map[string]any{"audit": map[string]any{"interval": "10m"}}},
		// The second line is in the base, on by default, as the NetworkPolicy.
		{"second-line", "selfSigned", "self-signed", []string{"second-line"},
			map[string]any{"secondLine": map[string]any{"enabled": true}}},
		{"without-second-line", "selfSigned", "self-signed", []string{"without-second-line"},
			map[string]any{"secondLine": map[string]any{"enabled": false}}},
		{"without-policy-label-warning", "selfSigned", "self-signed", []string{"without-policy-label-warning"},
			map[string]any{"policyLabelWarning": map[string]any{"enabled": false}}},
		{"external-urls-without-node-ports", "selfSigned", "self-signed", []string{"external-urls-without-node-ports"},
			map[string]any{"externalURLs": map[string]any{"nodePorts": false}}},
		// All of them, in the order the chart adds their flags.
		{"all/certManager", "certManager", "cert-manager", []string{"external-urls-without-node-ports", "openreports", "second-line", "network-policy"},
			map[string]any{
				"externalURLs":  map[string]any{"nodePorts": false},
				"audit":         map[string]any{"interval": "10m"},
				"secondLine":    map[string]any{"enabled": true},
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

// TestNetworkPolicyByDefault: the base, both overlays and the chart with default values all
// restrict the webhook port to the control plane's addresses (reference §5: only the API server may
// ask for patches): one NetworkPolicy selects podpatch's pods, every rule that opens the
// webhook port names its sources, and the ports it names are the Deployment's; the metrics
// port stays open to pods and the probe port needs no rule. components/without-network-policy
// and networkPolicy.enabled=false, and only they, remove it.
func TestNetworkPolicyByDefault(t *testing.T) {
	check := func(t *testing.T, objs []*unstructured.Unstructured) {
		t.Helper()
		np := typedNetworkPolicy(t, objs)
		dep := typedDeployment(t, objs)
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		require.NoError(t, err)
		require.True(t, sel.Matches(labels.Set(dep.Spec.Template.Labels)), "the policy selects podpatch's pods")
		require.Contains(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		ports := map[string]bool{}
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				ports[p.Name] = true
			}
		}
		require.True(t, ports["webhook"] && ports["metrics"], "named ports: %v", ports)
		require.NotContains(t, np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress, "egress (to the API server) is left alone by default")
		opened := map[string]bool{}
		for i, rule := range np.Spec.Ingress {
			require.NotEmpty(t, rule.Ports, "rule %d opens every port", i)
			for _, p := range rule.Ports {
				require.True(t, ports[p.Port.String()], "rule %d: port %s is a named port of the Deployment", i, p.Port)
				opened[p.Port.String()] = true
				if p.Port.String() == "webhook" {
					require.NotEmpty(t, rule.From, "rule %d opens the webhook port to anyone", i)
					for _, peer := range rule.From {
						require.NotNil(t, peer.IPBlock, "rule %d: the webhook port is for the control plane's addresses", i)
						require.Equal(t, "172.16.0.0/12", peer.IPBlock.CIDR)
					}
				}
			}
		}
		require.True(t, opened["webhook"], "the API server can call the webhook")
		require.True(t, opened["metrics"], "Prometheus can scrape")
	}
	for _, dir := range []string{"manifests/base", "manifests/overlays/self-signed", "manifests/overlays/cert-manager"} {
		t.Run(dir, func(t *testing.T) {
			objs, err := cluster.Kustomize(filepath.Join(repoRoot, dir))
			require.NoError(t, err)
			check(t, objs)
		})
	}
	for _, mode := range []string{"selfSigned", "certManager"} {
		t.Run("chart/"+mode, func(t *testing.T) {
			r, err := renderChart(t, "podpatch", "podpatch-system", map[string]any{"tls": map[string]any{"mode": mode}})
			require.NoError(t, err)
			check(t, r.objects)
		})
	}
	t.Run("off", func(t *testing.T) {
		overlay := t.TempDir()
		kustomization := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n",
			relPath(t, overlay, filepath.Join("manifests", "overlays", "self-signed")),
			relPath(t, overlay, filepath.Join("manifests", "components", "without-network-policy")))
		require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644))
		built, err := cluster.Kustomize(overlay)
		require.NoError(t, err)
		require.Empty(t, objectsOfKind(built, "NetworkPolicy"))
		r, err := renderChart(t, "podpatch", "podpatch-system", map[string]any{"networkPolicy": map[string]any{"enabled": false}})
		require.NoError(t, err)
		require.Empty(t, objectsOfKind(r.objects, "NetworkPolicy"))
		require.Empty(t, objectsOfKind(r.hooks, "NetworkPolicy"), "nothing to let helm test's Pod through")
	})
}
