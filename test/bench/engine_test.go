package bench_test

// The engine's own benchmarks (`make bench-engine`): Apply and Patch for the Dask operator
// worker with the five layered policies of this package, alone and among 1,000 unrelated policies, for 1 and
// 10 containers; and compiling a policy set. `make bench` runs these stages and much more in one
// report (docs/benchmarks/benchmarks.md). Speed is measured here, never asserted.

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/policyfiles"
	"github.com/podpatch/podpatch/test/bench"
)

func BenchmarkApply(b *testing.B) {
	for _, n := range []int{5, 1000} {
		dir := b.TempDir()
		require.NoError(b, bench.WritePolicySet(dir, n))
		set, err := bench.LoadPolicySet(dir)
		require.NoError(b, err)
		for _, c := range bench.ContainerCounts {
			pod, err := bench.WorkerPod(root, c)
			require.NoError(b, err)
			in := policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: bench.Namespace}
			for _, mode := range []string{"patch", "object"} {
				apply := set.Apply
				if mode == "patch" {
					apply = set.Patch
				}
				b.Run(fmt.Sprintf("policies=%d/containers=%d/%s", n, c, mode), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						res, err := apply(in)
						if err != nil || len(res.Applied) != len(bench.MatchingLayers()) {
							b.Fatalf("applied %d policies, err %v", len(res.Applied), err)
						}
					}
				})
			}
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{5, 1000} {
		dir := b.TempDir()
		require.NoError(b, bench.WritePolicySet(dir, n))
		cms, err := policyfiles.ReadConfigMaps([]string{dir}, "default", nil)
		require.NoError(b, err)
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, probs := policies.Compile(cms, policies.DefaultOptions()); len(probs) > 0 {
					b.Fatal(policies.ProblemLines(probs))
				}
			}
		})
	}
}
