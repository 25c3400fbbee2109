package audit

// BenchmarkAudit measures the drift check at the scale of a large cluster: 10,000 Pods across 500
// namespaces against 1,000 policy ConfigMaps, in process (generated objects, no API server):
// the cost of one audit round once the objects are read. `make bench` runs it (hack/bench.sh);
// the figures are in docs/audit.md.

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

const (
	benchNamespaces       = 500
	benchPodsPerNamespace = 20
	benchPlatformCMs      = 20
	benchNamespaceCMs     = 980 // two in each of 490 namespaces
)

// benchConfigMaps are the 1,000 policy ConfigMaps: 20 platform ones (every layer, globs on
// the cluster name) and two in each of 490 namespaces.
func benchConfigMaps(rv string) []*corev1.ConfigMap {
	doc := func(name, body string) string {
		return "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name + "}\n" + body
	}
	cm := func(ns, name, body string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv,
			Labels: map[string]string{policies.PolicyLabel: "true"}}, Data: map[string]string{"p.yaml": doc(name, body)}}
	}
	var out []*corev1.ConfigMap
	modes := []string{"default", "merge", "enforce"}
	for i := range benchPlatformCMs {
		out = append(out, cm(policies.DefaultPlatformNamespace, fmt.Sprintf("platform-%02d", i), fmt.Sprintf(`spec:
  mode: %s
  match: {managers: [dask], roles: [worker], clusters: ["c-%02d*"]}
  template:
    metadata: {labels: {cost-center: cc-%02d}}
    spec:
      nodeSelector: {pool: pool-%02d}
      tolerations: [{key: dedicated, value: pool-%02d, effect: NoSchedule}]
      containers: [{name: "*", resources: {requests: {cpu: 500m, memory: 1Gi}}}]
`, modes[i%3], i%10, i, i, i)))
	}
	for i := range benchNamespaceCMs {
		ns := fmt.Sprintf("ns-%03d", i/2)
		out = append(out, cm(ns, fmt.Sprintf("team-%d", i%2), fmt.Sprintf(`spec:
  match: {managers: [dask]}
  template:
    metadata: {labels: {team: team-%03d-%d}}
    spec:
      containers: [{name: "@main", resources: {limits: {memory: %dGi}}, env: [{name: TEAM, value: t%d}]}]
`, i/2, i%2, 2+i%2, i)))
	}
	return out
}

func benchSet(b *testing.B, rv string) *policies.Set {
	b.Helper()
	opts := policies.DefaultOptions()
	opts.WithResourceVersion = true
	var all []*policies.Policy
	for _, cm := range benchConfigMaps(rv) {
		ps, probs := policies.ParseConfigMap(cm, opts)
		require.Empty(b, probs)
		all = append(all, ps...)
	}
	return policies.NewSet(all)
}

// benchPods are 10,000 Dask worker Pods (the operator's fixture) as the API server would store
// them: 80% admitted by podpatch, 10% created while it was down, 10% admitted then edited.
func benchPods(b *testing.B, set *policies.Set) (objs []Object, wantDrift int) {
	b.Helper()
	raw, err := os.ReadFile("../policies/testdata/fixtures/dask-operator/worker-pod.yaml")
	require.NoError(b, err)
	js, err := yaml.YAMLToJSON(raw)
	require.NoError(b, err)
	var tmpl map[string]any
	require.NoError(b, json.Unmarshal(js, &tmpl))
	for i := range benchNamespaces * benchPodsPerNamespace {
		ns, n := i/benchPodsPerNamespace, i%benchPodsPerNamespace
		meta := tmpl["metadata"].(map[string]any)
		meta["namespace"] = fmt.Sprintf("ns-%03d", ns)
		meta["name"] = fmt.Sprintf("c-%02d-worker-%d", n, i)
		meta["uid"] = fmt.Sprintf("uid-%d", i)
		meta["labels"].(map[string]any)["dask.org/cluster-name"] = fmt.Sprintf("c-%02d", n%10)
		pod, err := json.Marshal(tmpl)
		require.NoError(b, err)
		obj := Object{Kind: profiles.KindPod, JSON: pod}
		switch i % 10 {
		case 0: // never patched
			wantDrift++
		case 1: // admitted, then its node selector removed
			res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod})
			require.NoError(b, err)
			var stored map[string]any
			require.NoError(b, json.Unmarshal(res.Object, &stored))
			delete(stored["spec"].(map[string]any), "nodeSelector")
			obj.JSON, err = json.Marshal(stored)
			require.NoError(b, err)
			wantDrift++
		default:
			res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod})
			require.NoError(b, err)
			obj.JSON = res.Object
		}
		objs = append(objs, obj)
	}
	return objs, wantDrift
}

func BenchmarkAudit(b *testing.B) {
	set := benchSet(b, "100")
	objs, wantDrift := benchPods(b, set)
	b.Run(fmt.Sprintf("compile/configmaps=%d", benchPlatformCMs+benchNamespaceCMs), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchSet(b, "100")
		}
	})
	b.Run(fmt.Sprintf("check/pods=%d/namespaces=%d/configmaps=%d", len(objs), benchNamespaces, benchPlatformCMs+benchNamespaceCMs), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			drifted := 0
			for _, obj := range objs {
				f, ok, err := Check(set, obj)
				if err != nil || !ok {
					b.Fatalf("not audited: %v", err)
				}
				if f.Drift {
					drifted++
				}
			}
			if drifted != wantDrift {
				b.Fatalf("%d drift, want %d", drifted, wantDrift)
			}
		}
		b.ReportMetric(float64(len(objs))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	})
	// What a round of `podpatch serve` keeps until it has written the Reports: every Record.
	b.Run(fmt.Sprintf("retained/pods=%d", len(objs)), func(b *testing.B) {
		var before, after runtime.MemStats
		var kept map[string][]Record
		for b.Loop() {
			runtime.GC()
			runtime.ReadMemStats(&before)
			kept = map[string][]Record{}
			for _, obj := range objs {
				f, _, err := Check(set, obj)
				require.NoError(b, err)
				kept[f.Namespace] = append(kept[f.Namespace], f)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-findings")
		runtime.KeepAlive(kept)
	})
}
