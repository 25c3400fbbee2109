package bench_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/podpatch/podpatch/policies"
	"github.com/podpatch/podpatch/policies/profiles"
	"github.com/podpatch/podpatch/test/bench"
)

const root = "../.."

// TestPolicySets checks that every generated set compiles whole and that exactly the five
// matching policies apply to the worker, in layer order.
func TestPolicySets(t *testing.T) {
	for _, n := range bench.PolicyCounts {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			if err := bench.WritePolicySet(dir, n); err != nil {
				t.Fatal(err)
			}
			set, err := bench.LoadPolicySet(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := set.Count(policies.ScopePlatform) + set.Count(policies.ScopeNamespace); got != n {
				t.Fatalf("%d policies loaded, want %d", got, n)
			}
			for _, c := range bench.ContainerCounts {
				pod, err := bench.WorkerPod(root, c)
				if err != nil {
					t.Fatal(err)
				}
				res, err := set.Apply(policies.Input{Kind: profiles.KindPod, Object: pod, Namespace: bench.Namespace})
				if err != nil {
					t.Fatal(err)
				}
				var refs []string
				for _, p := range res.Applied {
					refs = append(refs, p.Ref)
				}
				want := []string{"podpatch-system/platform-defaults/worker-defaults", "default/team-defaults/team-labels",
					"podpatch-system/dask-pools/dask-workers", "default/team-overrides/big-workers", "podpatch-system/cost-center/cost-center"}
				if fmt.Sprint(refs) != fmt.Sprint(want) {
					t.Fatalf("%d containers: applied %v, want %v", c, refs, want)
				}
			}
			if n == 5 {
				matches, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
				if err != nil || len(matches) != 1 {
					t.Fatalf("%d files, want 1", len(matches))
				}
			}
		})
	}
}
