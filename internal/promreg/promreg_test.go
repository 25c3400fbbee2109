package promreg

import (
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
