// Package promreg registers podpatch's Prometheus collectors so that a second component of the
// same kind in one process (tests run several servers) shares the first one's collectors
// instead of failing.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry registers collectors with a prometheus.Registerer.
type Registry struct {
	reg prometheus.Registerer
	err error
}

// New returns a Registry for reg.
func New(reg prometheus.Registerer) *Registry { return &Registry{reg: reg} }

// Register registers c and returns it, or the collector already registered with the same
// descriptors. Any other error is kept for Err, and c is returned.
func (r *Registry) Register(c prometheus.Collector) prometheus.Collector {
	if err := r.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector
		}
		r.err = errors.Join(r.err, err)
	}
	return c
}

// Err returns the errors of every Register but those of collectors registered before.
func (r *Registry) Err() error { return r.err }

// RegisterRuntime registers the standard Go runtime collector (go_goroutines, go_threads,
// go_memstats_*, go_gc_*, go_gc_gomemlimit_bytes, go_sched_gomaxprocs_threads) and the process
// collector (process_resident_memory_bytes, process_open_fds, process_max_fds,
// process_cpu_seconds_total, process_start_time_seconds, …) that docs/metrics.md lists, so that
// memory, goroutines and file descriptors can be watched in production. A second call shares
// the first one's collectors.
func (r *Registry) RegisterRuntime() {
	r.Register(collectors.NewGoCollector())
	r.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
