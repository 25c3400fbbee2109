package promreg

import (
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

func TestRegisterShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCounter := func() prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "podpatch_test_total", Help: "A test counter."})
	}
	first, second := New(reg), New(reg)
	a := first.Register(newCounter()).(prometheus.Counter)
	b := second.Register(newCounter()).(prometheus.Counter)
	require.NoError(t, first.Err())
	require.NoError(t, second.Err())
	a.Inc()
	b.Inc()
	got, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 2.0, got[0].GetMetric()[0].GetCounter().GetValue(), "the second shares the first's counter")

	// Another collector under the same name, with other labels, is an error.
	third := New(reg)
	third.Register(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "podpatch_test_total", Help: "A test counter."}, []string{"x"}))
	require.Error(t, third.Err())
}

// TestRegisterRuntime checks that the Go runtime and process collectors are registered (twice
// without error, as two components of a test process would) and report this process.
func TestRegisterRuntime(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, second := New(reg), New(reg)
	first.RegisterRuntime()
	second.RegisterRuntime()
	require.NoError(t, first.Err())
	require.NoError(t, second.Err())
	families, err := reg.Gather()
	require.NoError(t, err)
	values := map[string]float64{}
	for _, f := range families {
		if m := f.GetMetric(); len(m) == 1 {
			values[f.GetName()] = m[0].GetGauge().GetValue() + m[0].GetCounter().GetValue()
		}
	}
	for _, name := range []string{"go_goroutines", "go_threads", "go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes",
		"go_memstats_sys_bytes", "go_gc_gomemlimit_bytes"} {
		require.Contains(t, values, name)
	}
	require.Positive(t, values["go_goroutines"])
	require.Positive(t, values["go_memstats_heap_alloc_bytes"])
	if runtime.GOOS == "linux" { // the process collector reads /proc
		for _, name := range []string{"process_resident_memory_bytes", "process_open_fds", "process_max_fds", "process_start_time_seconds"} {
			require.Contains(t, values, name)
		}
		require.Positive(t, values["process_resident_memory_bytes"])
		require.Positive(t, values["process_open_fds"])
	}
}
