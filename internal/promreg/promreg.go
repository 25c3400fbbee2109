// Package promreg registers podpatch's Prometheus collectors so that a second component of the
// same kind in one process (tests run several servers) shares the first one's collectors
// instead of failing.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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
