//go:build tools

// Package lint pins the linters `make test` runs: staticcheck and goimports, built from the Go
// module proxy into bin/ (hack/build-lint.sh), like the control plane in test/tools.
package lint

import (
	_ "golang.org/x/tools/cmd/goimports"
	_ "honnef.co/go/tools/cmd/staticcheck"
)
