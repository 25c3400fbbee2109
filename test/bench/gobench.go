package bench

import (
	"bufio"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// GoBench holds `go test -bench` results by benchmark name (without the GOMAXPROCS suffix)
// and unit (ns/op, cpu-ns/op, B/op, allocs/op); with -count > 1, the median of the runs.
type GoBench map[string]map[string]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

// ParseGoBench reads the output of `go test -bench`.
func ParseGoBench(r io.Reader) (GoBench, error) {
	runs := map[string]map[string][]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[3])
		if runs[m[1]] == nil {
			runs[m[1]] = map[string][]float64{}
		}
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			runs[m[1]][f[i+1]] = append(runs[m[1]][f[i+1]], v)
		}
	}
	out := GoBench{}
	for name, units := range runs {
		out[name] = map[string]float64{}
		for u, vs := range units {
			slices.Sort(vs)
			out[name][u] = vs[len(vs)/2]
		}
	}
	return out, sc.Err()
}

// Get returns a benchmark's value in a unit, and whether it was measured.
func (g GoBench) Get(name, unit string) (float64, bool) {
	v, ok := g[name][unit]
	return v, ok
}
