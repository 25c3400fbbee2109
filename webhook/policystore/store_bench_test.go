package policystore

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"syscall"
	"testing"
	"time"

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

// cpuTime is the CPU time of the process so far, every thread (garbage collection included).
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStore measures the policy store at 1,000 and 10,000 ConfigMaps: a cold start (every
// ConfigMap compiled, one publish), and republishing after one changed ConfigMap. heap-MB is
// what the loaded store holds; cpu-ns/op the process's CPU time per operation (the policy store goal
// for one change at 10,000 is 10 ms of CPU). `make bench` reports them.
func BenchmarkStore(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		cms := storeConfigMaps(n)
		b.Run(fmt.Sprintf("configmaps=%d/cold", n), func(b *testing.B) {
			b.ReportAllocs()
			var held float64
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer() // the collections that measure the heap are not the store's work
				base := heapLive()
				b.StartTimer()
				cpu0 := cpuTime(b)
				s := New(policies.DefaultOptions(), newTestMetrics(b), nil)
				for _, cm := range cms {
					s.Upsert(cm)
				}
				s.MarkSynced()
				cpu += cpuTime(b) - cpu0
				b.StopTimer()
				held = heapLive() - base
				runtime.KeepAlive(s)
				b.StartTimer()
			}
			b.ReportMetric(held/(1<<20), "heap-MB")
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("configmaps=%d/one-change", n), func(b *testing.B) {
			s := New(policies.DefaultOptions(), newTestMetrics(b), nil)
			for _, cm := range cms {
				s.Upsert(cm)
			}
			s.MarkSynced()
			changed := cms[n/2].DeepCopy()
			b.ReportAllocs()
			rv := 1
			cpu0 := cpuTime(b)
			for b.Loop() {
				rv++
				changed.ResourceVersion = strconv.Itoa(rv)
				s.Upsert(changed)
				s.Publish()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
