package bench_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/test/bench"
)

// storeGoBench is BenchmarkStore's output as `make bench` feeds it to the report.
const storeGoBench = `goos: linux
BenchmarkStore/configmaps=1000/cold-2         	       3	 460400635 ns/op	 220986333 cpu-ns/op	         4.432 heap-MB	87309517 B/op	 1394088 allocs/op
BenchmarkStore/configmaps=1000/one-change-2   	    4498	    317858 ns/op	    282527 cpu-ns/op	   93194 B/op	    1442 allocs/op
BenchmarkStore/configmaps=10000/cold-2        	       1	7340540675 ns/op	2536019000 cpu-ns/op	        39.98 heap-MB	828099888 B/op	13844835 allocs/op
BenchmarkStore/configmaps=10000/one-change-2  	     373	   3767562 ns/op	   1638231 cpu-ns/op	  197794 B/op	    2350 allocs/op
PASS
`

// scaleLog is `go test -v -run TestScale ./test/e2e` output, podpatch's log included.
const scaleLog = `=== RUN   TestScale
    scale_test.go:80: created 10001 policy ConfigMaps over 500 namespaces and the platform namespace in 14.2s
    scale_test.go:89: podpatch ready with 10001 policies 2.1s after it started
    scale_test.go:254: versions behind the last written when the create was sent: {0: 564, 1: 15}
    harness_test.go:76: podpatch output:
        {"level":"info","msg":"podpatch serving"}
--- PASS: TestScale (75.02s)
PASS
`

func storeReport(t *testing.T) *bench.Report {
	t.Helper()
	g, err := bench.ParseGoBench(strings.NewReader(storeGoBench))
	require.NoError(t, err)
	scale, err := bench.ParseScaleLog(strings.NewReader(scaleLog), "go test ./test/e2e -run '^TestScale$'")
	require.NoError(t, err)
	return &bench.Report{Bench: g, Scale: scale, StoreSettle: 5 * time.Second, StorePlotFile: "benchmarks-store.png",
		Store: []bench.StoreResult{
			{ConfigMaps: 100, Namespaces: 90, Ready: 300 * time.Millisecond, ReadyCPU: 200 * time.Millisecond, RSS: 25e6, PeakRSS: 30e6, Changes: 30, ChangeCPU: time.Millisecond},
			{ConfigMaps: 1000, Namespaces: 500, Ready: time.Second, ReadyCPU: 800 * time.Millisecond, RSS: 40e6, PeakRSS: 55e6, Changes: 30, ChangeCPU: 2 * time.Millisecond},
			{ConfigMaps: 10000, Namespaces: 500, Ready: 5100 * time.Millisecond, ReadyCPU: 4 * time.Second, RSS: 61e6, PeakRSS: 120e6,
				Changes: 30, ChangeCPU: 3 * time.Millisecond, ServedP50: 4 * time.Millisecond, ServedMax: 9 * time.Millisecond},
		}}
}

// TestStoreGoals: each goal of the policy store at scale is judged on its own figure, at its
// boundary, and a missing figure is "not measured", never met.
func TestStoreGoals(t *testing.T) {
	r := storeReport(t)
	goals := r.StoreGoals()
	require.Len(t, goals, 4)
	require.False(t, goals[0].Met, "5.1 s > 5 s")
	require.Contains(t, goals[0].Measured, "5.10 s")
	require.True(t, goals[1].Met, "1.6 ms ≤ 10 ms")
	require.Contains(t, goals[1].Measured, "1.64 ms")
	require.Contains(t, goals[1].Measured, "3.00 ms CPU per change")
	require.False(t, goals[2].Met, "61 MB > 60 MB")
	require.True(t, goals[3].Met, "40 MB ≤ 40 MB")

	r.Store[2].Ready, r.Store[2].RSS = 5*time.Second, 60e6
	for _, g := range r.StoreGoals() {
		require.True(t, g.Met, "at the boundary: %s", g.Goal)
	}

	empty := &bench.Report{}
	for _, g := range empty.StoreGoals() {
		require.False(t, g.Met, g.Goal)
		require.Equal(t, "not measured", g.Measured, g.Goal)
	}
}

// TestStoreReport: the report carries the store section, the scale test's verdict and lines
// without podpatch's log, and the plot is a PNG.
func TestStoreReport(t *testing.T) {
	r := storeReport(t)
	var md bytes.Buffer
	require.NoError(t, r.WriteMarkdown(&md))
	out := md.String()
	for _, want := range []string{
		"## The policy store",
		"| 10,000 | 500 | 5.10 s | 4.00 s | 61.0 MB | 120.0 MB | 3.00 ms | 4.00 ms / 9.00 ms |",
		"| 1,000 | 221 ms | 460 ms | 87.3 MB | 1394088 | 4.4 MiB | 283 µs | 318 µs | 93.2 KB | 1442 |",
		"| 10,000 | 2.54 s | 7.34 s | 828.1 MB | 13844835 | 40.0 MiB | 1.64 ms | 3.77 ms | 197.8 KB | 2350 |",
		"| Cold start to ready with 10,000 policy ConfigMaps (process start to /readyz OK, through the API server) | ≤ 5.00 s | **5.10 s** (CPU 4.00 s) | **NOT MET** |",
		"![steady RSS and cold start against the number of policy ConfigMaps](benchmarks-store.png)",
		"**--- PASS: TestScale (75.02s)**",
		"podpatch ready with 10001 policies 2.1s after it started",
		"of the 5.00 s after ready",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "podpatch serving", "podpatch's own log stays out")
	require.NotContains(t, out, "podpatch output:")
	require.True(t, r.Scale.Passed)

	failed, err := bench.ParseScaleLog(strings.NewReader("=== RUN   TestScale\n    scale_test.go:80: created\n"), "cmd")
	require.NoError(t, err)
	require.False(t, failed.Passed)
	require.Contains(t, failed.Verdict, "no verdict")

	path := filepath.Join(t.TempDir(), "store.png")
	require.NoError(t, r.WriteStorePlot(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(b, []byte("\x89PNG")), "a PNG")
}
