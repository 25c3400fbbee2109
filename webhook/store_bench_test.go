package webhook

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/policies"
)

// storeConfigMaps are n policy ConfigMaps as a large cluster holds them: one in ten in the
// platform namespace, the others spread over 500 team namespaces, one policy each.
func storeConfigMaps(n int) []*corev1.ConfigMap {
	out := make([]*corev1.ConfigMap, n)
	for i := range out {
		ns := fmt.Sprintf("team-%03d", i%500)
		if i%10 == 0 {
			ns = policies.DefaultPlatformNamespace
		}
		out[i] = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-%05d", i), Namespace: ns, ResourceVersion: "1",
				Labels: map[string]string{policies.PolicyLabel: "true"}},
			Data: map[string]string{"p.yaml": fmt.Sprintf(`apiVersion: podpatch.io/v1alpha1
kind: PodTemplatePatch
metadata: {name: p%d}
spec:
  match: {managers: [dask], roles: [worker], groups: ["group-%d-*"]}
  template:
    metadata: {labels: {policy: p%d}}
    spec:
      tolerations: [{key: pool-%d, operator: Exists, effect: NoSchedule}]
      containers:
        - name: "*"
          env: [{name: POLICY, value: p%d}]
          resources: {requests: {memory: 1Gi}}
`, i, i, i, i, i)},
		}
	}
	return out
}

// heapLive is the heap the program holds after a collection.
func heapLive() float64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64())
}

// BenchmarkStore measures the policy store at 1,000 and 10,000 ConfigMaps: a cold start (every
// ConfigMap compiled, one publish), and republishing after one changed ConfigMap. heap-MB is
// what the loaded store holds.
func BenchmarkStore(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		cms := storeConfigMaps(n)
		b.Run(fmt.Sprintf("configmaps=%d/cold", n), func(b *testing.B) {
			b.ReportAllocs()
			var held float64
			for b.Loop() {
				base := heapLive()
				s := NewStore(policies.DefaultOptions(), newTestMetrics(b), nil)
				for _, cm := range cms {
					s.Upsert(cm)
				}
				s.MarkSynced()
				held = heapLive() - base
				runtime.KeepAlive(s)
			}
			b.ReportMetric(held/(1<<20), "heap-MB")
		})
		b.Run(fmt.Sprintf("configmaps=%d/one-change", n), func(b *testing.B) {
			s := NewStore(policies.DefaultOptions(), newTestMetrics(b), nil)
			for _, cm := range cms {
				s.Upsert(cm)
			}
			s.MarkSynced()
			changed := cms[n/2].DeepCopy()
			b.ReportAllocs()
			rv := 1
			for b.Loop() {
				rv++
				changed.ResourceVersion = strconv.Itoa(rv)
				s.Upsert(changed)
				s.Publish()
			}
		})
	}
}
