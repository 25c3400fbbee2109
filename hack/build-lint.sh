#!/usr/bin/env bash
# Builds the linters `make test` runs — staticcheck and goimports, pinned in test/tools/lint —
# from the Go module proxy into BINDIR (default bin/), once: a binary is rebuilt only when it is
# missing or older than the module's go.mod or go.sum.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
bindir=${1:-$root/bin}
mkdir -p "$bindir"
bindir=$(cd "$bindir" && pwd) # the builds below run in the tools module's directory
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" CGO_ENABLED=0
mod=$root/test/tools/lint
for pkg in honnef.co/go/tools/cmd/staticcheck golang.org/x/tools/cmd/goimports; do
	bin=$bindir/$(basename "$pkg")
	if [[ -x $bin && $bin -nt $mod/go.mod && $bin -nt $mod/go.sum ]]; then
		continue
	fi
	echo "build-lint: building $(basename "$pkg")"
	(cd "$mod" && "$GO" build -o "$bin" "$pkg")
done
