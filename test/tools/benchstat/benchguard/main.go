// Command benchguard is `make bench-compare`'s verdict: it reads two files of `go test -bench`
// output, a baseline and a new run, and fails when a benchmark of the new run is worse than the
// baseline's beyond a threshold, per unit (docs/development.md, "Benchmark regressions").
//
// For a measure that varies between runs (sec/op), worse means both beyond the threshold (the
// medians) and significant: the Mann-Whitney U test of benchstat (golang.org/x/perf/benchmath,
// alpha 0.05), which needs at least 4+4 samples to ever reject (6+6 gives p ≈ 0.002 for a clean
// shift). For a count that does not (allocs/op), the medians alone decide, so a single run
// suffices: `-exact allocs/op`. Benchmarks or units present in only one file are reported, not
// failed.
//
//	benchguard -threshold sec/op=15 -threshold allocs/op=10 -exact allocs/op baseline.txt new.txt
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// thresholds maps a unit to the largest increase of its median, in per cent, that passes.
type thresholds map[string]float64

func (t thresholds) String() string { return fmt.Sprint(map[string]float64(t)) }

func (t thresholds) Set(s string) error {
	unit, pct, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q: want unit=percent", s)
	}
	v, err := strconv.ParseFloat(pct, 64)
	if err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	t[unit] = v
	return nil
}

type units []string

func (u *units) String() string     { return strings.Join(*u, ",") }
func (u *units) Set(s string) error { *u = append(*u, s); return nil }

// samples is, per benchmark name and unit, the values of one file.
type samples map[string]map[string][]float64

func read(path string) (samples, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := samples{}
	r := benchfmt.NewReader(f, path)
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue // configuration lines, syntax errors of unrelated output
		}
		name := res.GetConfig("pkg") + "." + string(res.Name.Full())
		if out[name] == nil {
			out[name] = map[string][]float64{}
		}
		for _, v := range res.Values { // normalized units: ns/op is sec/op, as benchstat shows it
			out[name][v.Unit] = append(out[name][v.Unit], v.Value)
		}
	}
	return out, r.Err()
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func run(args []string, stdout io.Writer) (failed bool, err error) {
	fs := flag.NewFlagSet("benchguard", flag.ContinueOnError)
	th := thresholds{}
	var exact units
	alpha := fs.Float64("alpha", 0.05, "significance level of the U test")
	fs.Var(th, "threshold", "unit=percent: fail when the new median exceeds the baseline's by more (repeatable)")
	fs.Var(&exact, "exact", "a unit whose values do not vary between runs: the medians alone decide (repeatable)")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if fs.NArg() != 2 || len(th) == 0 {
		return false, fmt.Errorf("usage: benchguard -threshold unit=percent... [-exact unit] baseline new")
	}
	base, err := read(fs.Arg(0))
	if err != nil {
		return false, err
	}
	cur, err := read(fs.Arg(1))
	if err != nil {
		return false, err
	}
	thr := benchmath.DefaultThresholds
	thr.CompareAlpha = *alpha
	compared := 0
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range cur {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, unit := range slices.Sorted(func(yield func(string) bool) {
			for k := range th {
				if !yield(k) {
					return
				}
			}
		}) {
			nv, bv := cur[name][unit], base[name][unit]
			if len(nv) == 0 {
				continue
			}
			if len(bv) == 0 {
				fmt.Fprintf(stdout, "new      %s %s: no baseline\n", name, unit)
				continue
			}
			compared++
			bm, nm := median(bv), median(nv)
			delta := 0.0
			if bm != 0 {
				delta = (nm/bm - 1) * 100
			}
			verdict, why := "ok", ""
			if slices.Contains(exact, unit) {
				if delta > th[unit] {
					verdict = "WORSE"
				}
			} else {
				c := benchmath.AssumeNothing.Compare(benchmath.NewSample(bv, &thr), benchmath.NewSample(nv, &thr))
				why = " " + c.String()
				if delta > th[unit] && c.P < c.Alpha {
					verdict = "WORSE"
				}
			}
			if verdict != "ok" {
				failed = true
			}
			fmt.Fprintf(stdout, "%-8s %s %s: %.4g -> %.4g (%+.1f%%, limit +%g%%)%s\n", verdict, name, unit, bm, nm, delta, th[unit], why)
		}
	}
	for name := range base {
		if cur[name] == nil {
			fmt.Fprintf(stdout, "gone     %s: in the baseline only\n", name)
		}
	}
	if compared == 0 {
		return true, fmt.Errorf("no benchmark of %s has a baseline in %s", fs.Arg(1), fs.Arg(0))
	}
	return failed, nil
}

func main() {
	failed, err := run(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchguard:", err)
		os.Exit(2)
	}
	if failed {
		fmt.Fprintln(os.Stderr, "benchguard: a benchmark is worse than its baseline beyond its threshold")
		os.Exit(1)
	}
}
