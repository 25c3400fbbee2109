package webhook

import (
	"os"
	"runtime/debug"

	"github.com/go-logr/logr"

	"github.com/podpatch/podpatch/webhook/slots"
)

// SetSoftMemoryLimit gives the Go runtime a soft memory limit of slots.MemoryLimitShare of the
// container's limit (bytes; nothing when not positive), so that the GC works harder near it
// instead of the process being OOM-killed. An explicit GOMEMLIMIT wins.
func SetSoftMemoryLimit(limit int64, log logr.Logger) {
	if limit <= 0 {
		return
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("GOMEMLIMIT is set; --memory-limit ignored", "GOMEMLIMIT", v)
		return
	}
	soft := int64(float64(limit) * slots.MemoryLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info("Go soft memory limit set", "containerLimit", limit, "softLimit", soft)
}
