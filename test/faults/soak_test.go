package faults

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// compactEtcd compacts etcd's history up to its current revision through etcd's v3 API (the
// JSON gateway of its KV service: a range for the revision, then a physical compaction) and
// returns the revision.
func compactEtcd(etcdURL string) (int64, error) {
	post := func(path string, body any, out any) error {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		resp, err := http.Post(etcdURL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd %s: %s", path, resp.Status)
		}
		return json.NewDecoder(resp.Body).Decode(out)
	}
	var r struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := post("/v3/kv/range", map[string]any{"key": base64.StdEncoding.EncodeToString([]byte("/"))}, &r); err != nil {
		return 0, err
	}
	var rev int64
	if _, err := fmt.Sscan(r.Header.Revision, &rev); err != nil {
		return 0, fmt.Errorf("etcd revision %q: %w", r.Header.Revision, err)
	}
	var ignored map[string]any
	if err := post("/v3/kv/compaction", map[string]any{"revision": rev, "physical": true}, &ignored); err != nil {
		return 0, err
	}
	return rev, nil
}

// The figures sampled during the soak, from each replica's /metrics (promreg.RegisterRuntime).
var soakSeries = []string{"go_memstats_heap_inuse_bytes", "go_goroutines", "process_open_fds", "process_resident_memory_bytes"}

// leakLimits are the slopes (per minute, least squares after the warm-up; for heap and RSS
// through the lowest sample of each 10 s, as the collector's sawtooth is no growth) above which
// the soak fails. A goroutine or a file descriptor leaked per admission or per policy update
// grows by hundreds a minute at the soak's rates (8 or 15 admissions and 2 policy updates a
// second), far above 10 and 5. For memory, 4 MiB a minute is a leak of at least 9 KiB per
// admission at 8 a second (4.5 KiB at 15), or 34 KiB per policy update: a retained review,
// decoded object or compiled policy set, not a few bytes — those show only in the 30-minute
// soak's absolute growth. Resident memory follows the heap's high-water mark (the runtime
// returns memory lazily) and climbs for minutes after a start, hence its wider 16 MiB; a leak
// shows on the heap first. Without one the heap's slope stays around a megabyte a minute, and
// goroutines and descriptors within one or two.
var leakLimits = map[string]float64{
	"go_memstats_heap_inuse_bytes":  4 << 20, // 4 MiB a minute
	"go_goroutines":                 10,
	"process_open_fds":              5,
	"process_resident_memory_bytes": 16 << 20,
}

// soak runs a steady admission rate with 2 policy updates a second for tr.soak, on a cluster
// of constant size (each object deleted once checked), sampling each replica's heap,
// goroutines, open fds and RSS every 2 s, and fails on a slope above leakLimits.
func (e *env) soak(t *testing.T, tr tier) row {
	ctx := context.Background()
	// Objects are deleted once checked: a growing cluster grows the leader's Service cache
	// (a few MiB a minute at these rates), which is no leak.
	l := e.startLoadWith(t, tr.rate, tr.workers, true)
	stopChurn := make(chan struct{})
	churned := make(chan int)
	go func() {
		n := 0
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopChurn:
				churned <- n
				return
			case <-tick.C:
				if e.churnOnce(ctx) == nil {
					n++
				}
			}
		}
	}()
	// The short tier soaks replicas the rolling update started a minute before: their caches
	// (informers, reference caches, the resolver's) fill in their first half minute.
	warmup := min(30*time.Second, tr.soak/3)
	type sample struct {
		at time.Duration
		v  map[string]float64
	}
	samples := map[string][]sample{}
	start := time.Now()
	tick := time.NewTicker(2 * time.Second)
	for time.Since(start) < tr.soak {
		<-tick.C
		if time.Since(start) < warmup {
			continue
		}
		for _, r := range e.live() {
			m, err := metrics(r)
			require.NoError(t, err)
			samples[r.name] = append(samples[r.name], sample{time.Since(start), m})
		}
	}
	tick.Stop()
	close(stopChurn)
	updates := <-churned
	c := l.finish()
	note := fmt.Sprintf("%s at %.0f/s, %d policy updates; slopes per minute:", tr.soak, tr.rate, updates)
	var leaks []string
	for name, ss := range samples {
		for _, series := range soakSeries {
			var xs, ys []float64
			for _, s := range ss {
				xs, ys = append(xs, s.at.Minutes()), append(ys, s.v[series])
			}
			fx, fy := xs, ys
			if series == "go_memstats_heap_inuse_bytes" || series == "process_resident_memory_bytes" {
				fx, fy = floor(xs, ys, 10*time.Second) // the GC's sawtooth is not growth
			}
			slope := leastSquares(fx, fy)
			note += fmt.Sprintf(" %s %s %s (%s → %s);", name, series, human(series, slope), human(series, ys[0]), human(series, ys[len(ys)-1]))
			if slope > leakLimits[series] {
				leaks = append(leaks, fmt.Sprintf("%s %s %s/min", name, series, human(series, slope)))
			}
		}
	}
	t.Log(note)
	require.Zero(t, c.Wrong, "%q", c.samples)
	require.Zero(t, c.Failed+c.Unpatched, "%q", c.samples)
	require.Empty(t, leaks, "a leak: slopes above the limits %v", leakLimits)
	return row{"soak", c, 0, note}
}

// floor returns the lowest sample of each window of the given length (at the window's mean
// time): the memory left after the collector ran, which a leak raises. Fewer than three
// windows: the samples themselves.
func floor(xs, ys []float64, window time.Duration) ([]float64, []float64) {
	w := window.Minutes()
	var fx, fy []float64
	for i := 0; i < len(xs); {
		j, lo, sum := i, ys[i], 0.0
		for ; j < len(xs) && xs[j] < xs[i]+w; j++ {
			lo, sum = min(lo, ys[j]), sum+xs[j]
		}
		fx, fy = append(fx, sum/float64(j-i)), append(fy, lo)
		i = j
	}
	if len(fx) < 3 {
		return xs, ys
	}
	return fx, fy
}

// leastSquares is the slope of the least-squares line through (xs, ys).
func leastSquares(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func human(series string, v float64) string {
	if series == "go_goroutines" || series == "process_open_fds" {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2fMiB", v/(1<<20))
}
