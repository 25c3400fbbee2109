package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lines writes `go test -bench` output: one line per (ns/op, allocs/op) pair.
func lines(t *testing.T, runs [][2]float64) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("goos: linux\npkg: example.com/p\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "BenchmarkX-2   \t1000\t%g ns/op\t100 B/op\t%g allocs/op\n", r[0], r[1])
	}
	path := filepath.Join(t.TempDir(), "bench.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBenchguard(t *testing.T) {
	six := func(ns, allocs float64, spread float64) [][2]float64 {
		var out [][2]float64
		for i := range 6 {
			out = append(out, [2]float64{ns * (1 + spread*float64(i-3)/100), allocs})
		}
		return out
	}
	args := []string{"-threshold", "sec/op=15", "-threshold", "allocs/op=10", "-exact", "allocs/op"}
	for _, c := range []struct {
		name      string
		base, new [][2]float64
		fail      bool
	}{
		{"same", six(1000, 300, 2), six(1000, 300, 2), false},
		{"faster and fewer", six(1000, 300, 2), six(700, 250, 2), false},
		{"slower within the threshold", six(1000, 300, 2), six(1100, 300, 2), false},
		{"slower beyond it, significant", six(1000, 300, 2), six(1300, 300, 2), true},
		{"slower beyond it, too few runs to tell", [][2]float64{{1000, 300}}, [][2]float64{{1300, 300}}, false},
		{"allocations beyond the threshold, one run", [][2]float64{{1000, 300}}, [][2]float64{{1000, 340}}, true},
		{"allocations within it", [][2]float64{{1000, 300}}, [][2]float64{{1000, 320}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			failed, err := run(append(args, lines(t, c.base), lines(t, c.new)), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if failed != c.fail {
				t.Errorf("failed = %v, want %v", failed, c.fail)
			}
		})
	}
}
