package faults

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSlope checks the soak's arithmetic: least squares recovers a line's slope, and the
// 10-second floor sees through a GC-like sawtooth to the growth beneath it (and reports none
// where there is none).
func TestSlope(t *testing.T) {
	var xs, flat, leak, worse []float64
	for i := range 90 { // 3 minutes sampled every 2 s
		x := float64(i*2) / 60
		saw := float64(i%4) * float64(5<<20) // climbs 15 MiB in 8 s, then collected
		xs = append(xs, x)
		flat = append(flat, 50<<20+saw)
		leak = append(leak, 50<<20+saw+x*(3<<20)) // 3 MiB a minute beneath
		worse = append(worse, 50<<20+saw+x*(6<<20))
	}
	require.InDelta(t, 2.0, leastSquares([]float64{0, 1, 2}, []float64{1, 3, 5}), 1e-9)
	require.InDelta(t, 0, leastSquares(floor(xs, flat, 10*time.Second)), 1e-9)
	require.InDelta(t, 3<<20, leastSquares(floor(xs, leak, 10*time.Second)), 0.2*(3<<20))
	require.Less(t, leastSquares(floor(xs, leak, 10*time.Second)), leakLimits["go_memstats_heap_inuse_bytes"])
	require.Greater(t, leastSquares(floor(xs, worse, 10*time.Second)), leakLimits["go_memstats_heap_inuse_bytes"])
	fx, fy := floor(xs[:4], flat[:4], 10*time.Second)
	require.Equal(t, xs[:4], fx, "fewer than three windows: the samples")
	require.Equal(t, flat[:4], fy)
	require.False(t, math.IsNaN(leastSquares(nil, nil)))
}
