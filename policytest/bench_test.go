package policytest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkSuite1000 runs a suite of 1,000 cases (a Dask worker with field, applied and findings
// expectations) through RunFile: load, compile the example policies, apply, compare.
func BenchmarkSuite1000(b *testing.B) {
	var s strings.Builder
	fmt.Fprintf(&s, "apiVersion: podpatch.io/v1alpha1\nkind: PolicyTest\nmetadata: {name: bench}\nspec:\n  policies: [../../manifests/examples]\n  cases:\n")
	for i := range 1000 {
		fmt.Fprintf(&s, "    - name: c%d\n      file: %s\n      expect:\n        applied: [podpatch-system/cost-center/cost-center, podpatch-system/platform-defaults/worker-requests, podpatch-system/security-baseline/security-baseline, default/team-overrides/big-workers]\n        findings: []\n        fields:\n          - {path: \"metadata.labels[cost-center]\", value: data-platform}\n", i, worker)
	}
	path := filepath.Join("testdata", "tmp-bench.yaml")
	if err := os.WriteFile(path, []byte(s.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.Remove(path) })
	o := repo(b)
	for b.Loop() {
		rs, err := RunFile(path, o)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if !r.Pass {
				b.Fatalf("%s: %v", r.ID(), r.Failures)
			}
		}
	}
}
