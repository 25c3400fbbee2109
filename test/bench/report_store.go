package bench

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// The policy store's goals at scale: cold start, the cost of a change and steady RSS.
const (
	goalColdStart10k = 5 * time.Second
	goalChangeCPU10k = 10 * time.Millisecond
	goalRSS10k       = 60 * 1000 * 1000
	goalRSS1k        = 40 * 1000 * 1000
)

// storeBench names BenchmarkStore's results (webhook/policystore/store_bench_test.go).
func storeBench(configMaps int, op string) string {
	return fmt.Sprintf("BenchmarkStore/configmaps=%d/%s", configMaps, op)
}

// storeResult returns the store run's result at a ConfigMap count.
func (r *Report) storeResult(configMaps int) (StoreResult, bool) {
	for _, s := range r.Store {
		if s.ConfigMaps == configMaps {
			return s, true
		}
	}
	return StoreResult{}, false
}

// StoreGoals evaluates the policy store's goals at scale on this run's figures. A goal whose
// figures are missing is not met.
func (r *Report) StoreGoals() []Goal {
	var goals []Goal
	add := func(g Goal, ok bool) {
		if !ok {
			g.Measured, g.Met = "not measured", false
		}
		goals = append(goals, g)
	}

	g := Goal{Goal: "Cold start to ready with 10,000 policy ConfigMaps (process start to /readyz OK, through the API server)",
		Target: "≤ " + seconds(goalColdStart10k)}
	s, ok := r.storeResult(10000)
	if ok {
		g.Measured = fmt.Sprintf("**%s** (CPU %s)", seconds(s.Ready), seconds(s.ReadyCPU))
		g.Met = s.Ready <= goalColdStart10k
	}
	add(g, ok)

	g = Goal{Goal: "Republishing after one changed ConfigMap at 10,000 (`BenchmarkStore`, one-change)", Target: "≤ 10 ms CPU"}
	cpu, ok := r.Bench.Get(storeBench(10000, "one-change"), "cpu-ns/op")
	if ok {
		g.Measured = fmt.Sprintf("**%s** CPU", us(cpu))
		if s, found := r.storeResult(10000); found && s.Changes > 0 {
			g.Measured += fmt.Sprintf(" (the server: %s CPU per change with the informer's decode, served %s after the update's answer, p50)",
				us(float64(s.ChangeCPU)), ms(s.ServedP50))
		}
		g.Met = time.Duration(cpu) <= goalChangeCPU10k
	}
	add(g, ok)

	for _, c := range []struct {
		n    int
		goal int64
	}{{10000, goalRSS10k}, {1000, goalRSS1k}} {
		g := Goal{Goal: fmt.Sprintf("Steady RSS with %s policy ConfigMaps", thousands(c.n)), Target: "≤ " + mb(c.goal)}
		s, ok := r.storeResult(c.n)
		if ok {
			g.Measured = fmt.Sprintf("**%s** (peak %s)", mb(s.RSS), mb(s.PeakRSS))
			g.Met = s.RSS <= c.goal
		}
		add(g, ok)
	}
	return goals
}

// ScaleRun is the end-to-end scale test (test/e2e TestScale) as `make bench` ran it.
type ScaleRun struct {
	// Command is how it was run; Verdict its `--- PASS`/`--- FAIL` line.
	Command, Verdict string
	Passed           bool
	// Lines are what the test logged, without podpatch's own log.
	Lines []string
}

var scaleVerdict = regexp.MustCompile(`^--- (PASS|FAIL): TestScale \(`)

// ParseScaleLog reads the `go test -v` output of TestScale.
func ParseScaleLog(rd io.Reader, command string) (*ScaleRun, error) {
	run := &ScaleRun{Command: command}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	in := false
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "=== RUN   TestScale"):
			in = true
		case scaleVerdict.MatchString(line):
			run.Verdict, run.Passed, in = trimmed, strings.HasPrefix(line, "--- PASS"), false
		case in && trimmed != "" && !strings.HasPrefix(trimmed, "{") && !strings.HasSuffix(trimmed, "podpatch output:") && len(run.Lines) < 40:
			run.Lines = append(run.Lines, trimmed)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if run.Verdict == "" {
		run.Verdict = "no verdict: the test did not run to its end"
	}
	return run, nil
}

// writeStore reports the policy store: the server against the API server, BenchmarkStore, and
// the end-to-end scale test.
func (r *Report) writeStore(p *printer) {
	p.f("## The policy store\n\n")
	p.f("| goal | target | this run | |\n|---|---|---|---|\n")
	p.goalRows(r.StoreGoals())

	p.f("### `podpatch serve` against the API server\n\n")
	if r.StoreSkipped != "" {
		p.f("Not measured: %s\n\n", r.StoreSkipped)
	} else if len(r.Store) > 0 {
		if r.StorePlotFile != "" {
			p.f("![steady RSS and cold start against the number of policy ConfigMaps](%s)\n\n", r.StorePlotFile)
		}
		p.f("| ConfigMaps | namespaces | ready after | CPU to ready | steady RSS | peak RSS | CPU per change | change served after (p50 / max) |\n")
		p.f("|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Store {
			p.f("| %s | %d | %s | %s | %s | %s | %s | %s / %s |\n", thousands(s.ConfigMaps), s.Namespaces, seconds(s.Ready), seconds(s.ReadyCPU),
				mb(s.RSS), mb(s.PeakRSS), us(float64(s.ChangeCPU)), ms(s.ServedP50), ms(s.ServedMax))
		}
		p.f("\nThe population is `test/cluster.Scale`, as in the end-to-end scale test: one ConfigMap in ten in\n")
		p.f("`podpatch-system`, the others round the namespaces in turn, one namespace per 20 ConfigMaps (the namespaces\n")
		p.f("of the largest count exist throughout), one Dask worker policy each. For each count\n")
		p.f("podpatch starts against kube-apiserver with `--kubeconfig` (the informer's list of every labelled ConfigMap);\n")
		p.f("*ready after* is from the process's start to the first `/readyz` answered OK (polled every 10 ms), *CPU to\n")
		p.f("ready* its utime+stime then (`/proc`, 10 ms ticks). *Steady RSS* is the median VmRSS over the second half\n")
		p.f("of the %s after ready, *peak* VmHWM (the load included); no `--memory-limit`, so no GOMEMLIMIT. Then one\n",
			seconds(r.StoreSettle))
		p.f("platform ConfigMap (its namespace holds a tenth of them) is changed %d times, each alone (the next once the\n", r.Store[0].Changes)
		p.f("change before is served and 150 ms have passed): *CPU per change* is the process's CPU over those changes\n")
		p.f("divided by them (the informer's decode, compile and publish, and the idle costs and `/readyz` polls of the\n")
		p.f("period); *served after* is from the update's answer to the new generation in `/readyz` (polled every 2 ms).\n\n")
	}

	p.f("### In process: `BenchmarkStore` (webhook/policystore)\n\n")
	p.f("*Cold*: every ConfigMap upserted into a new `policystore.Store`, then `MarkSynced` (one publish); *heap held* is\n")
	p.f("the live heap the loaded store keeps. *One change*: one platform ConfigMap upserted at a new resourceVersion\n")
	p.f("and published (its namespace, a tenth of the ConfigMaps, recompiled). CPU is the process's (`getrusage`).\n\n")
	p.f("| ConfigMaps | cold: CPU | wall | B/op | allocs/op | heap held | one change: CPU | wall | B/op | allocs/op |\n")
	p.f("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range []int{1000, 10000} {
		cold, ok1 := r.Bench[storeBench(n, "cold")]
		one, ok2 := r.Bench[storeBench(n, "one-change")]
		if !ok1 && !ok2 {
			continue
		}
		heap := "–"
		if v, ok := cold["heap-MB"]; ok {
			heap = fmt.Sprintf("%.1f MiB", v)
		}
		p.f("| %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %.0f |\n", thousands(n),
			seconds(time.Duration(cold["cpu-ns/op"])), seconds(time.Duration(cold["ns/op"])), kb(cold["B/op"]), cold["allocs/op"], heap,
			us(one["cpu-ns/op"]), us(one["ns/op"]), kb(one["B/op"]), one["allocs/op"])
	}
	p.f("\n")

	if r.Scale != nil {
		p.f("### End-to-end scale test\n\n`%s`: **%s**\n\n", r.Scale.Command, r.Scale.Verdict)
		p.f("Policy ConfigMaps created through the API server, podpatch started, then the `moving` platform policy\n")
		p.f("changed every 100 ms for 30 s while Dask worker Pods were created: no create may fail, every stored Pod\n")
		p.f("must be patched, and its `@resourceVersion` of the moving policy must be the version written last before\n")
		p.f("its create was sent, or the one before (`test/e2e/scale_test.go`). What it logged:\n\n```\n%s\n```\n\n",
			strings.Join(r.Scale.Lines, "\n"))
	}
}

func seconds(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}
