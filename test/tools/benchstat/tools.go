//go:build tools

// Package benchstat pins golang.org/x/perf, whose benchstat `make bench-compare` runs and whose
// benchfmt and benchmath its guard (./benchguard) reads benchmark results with; built from the Go
// module proxy into bin/ (hack/build-benchstat.sh), like the linters in test/tools/lint.
package benchstat

import (
	_ "golang.org/x/perf/cmd/benchstat"
)
