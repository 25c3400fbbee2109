package preview

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/placement"
	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
)

// livePods are n Pods of the managers' fixtures as the API server returns them once admitted
// under the base set (canonical JSON, provenance), spread over n/50 compute clusters.
func livePods(b testing.TB, s Sets, n int) []Input {
	var pods []Input
	for _, in := range fixtures(b) {
		if in.Kind == profiles.KindPod {
			pods = append(pods, in)
		}
	}
	out := make([]Input, n)
	for i := range n {
		in := pods[i%len(pods)]
		var obj map[string]any
		require.NoError(b, json.Unmarshal(in.JSON, &obj))
		meta := obj["metadata"].(map[string]any)
		meta["name"] = fmt.Sprintf("pod-%d", i)
		meta["uid"] = fmt.Sprintf("uid-%d", i)
		js, err := json.Marshal(obj)
		require.NoError(b, err)
		res, err := s.Base.Apply(policies.Input{Kind: in.Kind, Object: js, Namespace: in.Namespace})
		require.NoError(b, err)
		stored, err := objdiff.Canonical(string(in.Kind), res.Object)
		require.NoError(b, err)
		live, err := json.Marshal(stored)
		require.NoError(b, err)
		out[i] = Input{Kind: in.Kind, JSON: live, Namespace: in.Namespace, Live: true}
	}
	return out
}

// BenchmarkDiff10000LivePods previews a change that touches every one of 10,000 live Pods
// (a default, a namespace ConfigMap, a deleted merge policy and sidecar, a new placement
// policy checked against 1,000 Nodes), gathers the report and writes it as Markdown: the work
// of `podpatch diff` after the List calls.
func BenchmarkDiff10000LivePods(b *testing.B) {
	s := newSets(b, scenarios[len(scenarios)-1])
	pods := livePods(b, s, benchPods)
	snap := &placement.Snapshot{}
	for i := range 1000 {
		snap.Nodes = append(snap.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{"pool": "cpu"}}})
	}
	var size int
	cpu := cpuTime()
	b.ResetTimer()
	for range b.N {
		r := NewRunner(s, snap, 0)
		r.OnError = func(err error) { b.Fatal(err) }
		for _, in := range pods {
			r.Add(in)
		}
		rep := r.Report()
		if rep.Stats.Changed != len(pods) {
			b.Fatalf("%d of %d changed", rep.Stats.Changed, len(pods))
		}
		var md strings.Builder
		if err := Write(&md, rep, "markdown"); err != nil {
			b.Fatal(err)
		}
		size = md.Len()
	}
	b.StopTimer()
	// CPU seconds too: on a shared machine the wall time says more about the neighbours.
	b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(size), "markdown-bytes")
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPods is how many Pods BenchmarkDiff10000LivePods previews.
var benchPods = 10000
