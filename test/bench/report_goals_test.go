package bench_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/test/bench"
)

// TestTightenedGoals: the goals the memory and hot-path work tightened are judged at their new
// targets, and the worst case's goal is the benchmark less its floor; the store's heap profiles
// get their section.
func TestTightenedGoals(t *testing.T) {
	gb, err := bench.ParseGoBench(strings.NewReader(`
BenchmarkHandler/policies=5/containers=1-2  100  1 ns/op  150000 cpu-ns/op
BenchmarkReference/containers=1/floor-2     100  1 ns/op  100000 cpu-ns/op
BenchmarkWorstCase/containers=1/items=12000-2        10  73000000 ns/op
BenchmarkWorstCaseFloor/containers=1/items=12000-2   10  53000000 ns/op
BenchmarkWorstCase/containers=10/items=1500-2        10  40000000 ns/op
BenchmarkWorstCaseFloor/containers=10/items=1500-2   10  15000000 ns/op
`))
	require.NoError(t, err)
	r := &bench.Report{Bench: gb}
	met := map[string]bool{}
	for _, g := range r.Goals() {
		met[g.Goal] = g.Met
	}
	require.True(t, met["In-process CPU per admission, 1-container worker, 5 policies"], "1.5× exactly is met")
	require.True(t, met["BenchmarkWorstCase containers=1/items=12000, excluding reading the body (less WorstCaseFloor)"], "20 ms exactly is met")
	require.False(t, met["BenchmarkWorstCase containers=10/items=1500, excluding reading the body (less WorstCaseFloor)"], "25 ms is not")

	r.Bench["BenchmarkHandler/policies=5/containers=1"]["cpu-ns/op"] = 150001
	for _, g := range r.Goals() {
		if g.Goal == "In-process CPU per admission, 1-container worker, 5 policies" {
			require.False(t, g.Met, "beyond 1.5×")
		}
	}

	r.HeapProfiles = []bench.Profile{{Name: "store-1000", Pprof: "docs/benchmarks/heap/store-1000.heap.pprof",
		Top: "docs/benchmarks/heap/store-1000.heap.txt", TopHead: []string{"      flat  flat%", "1.2MB 50% policies.parseDocument"}}}
	r.HeapLog = []string{"configmaps=1000: the store holds 1.72 MiB, 1807 bytes per ConfigMap"}
	var md bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&md))
	require.Contains(t, md.String(), "## Memory of a compiled policy set")
	require.Contains(t, md.String(), "the store holds 1.72 MiB")
	require.Contains(t, md.String(), "[`docs/benchmarks/heap/store-1000.heap.pprof`](heap/store-1000.heap.pprof)")
	require.Contains(t, md.String(), "[memory-and-hot-path.md](memory-and-hot-path.md)")
}
