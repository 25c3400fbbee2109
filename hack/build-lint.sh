#!/usr/bin/env bash
# Builds the linters `make test` runs — staticcheck and goimports, pinned in test/tools/lint —
# from the Go module proxy into BINDIR (default bin/), once: a binary is rebuilt only when its
# module changed (hack/lib/gobuild.sh, with the machine's shared cache of tool binaries).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
bindir=${1:-$root/bin}
mkdir -p "$bindir"
bindir=$(cd "$bindir" && pwd) # the builds below run in the tools module's directory
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" CGO_ENABLED=0
mod=$root/test/tools/lint
# shellcheck source=lib/gobuild.sh
. "$root/hack/lib/gobuild.sh"
for pkg in honnef.co/go/tools/cmd/staticcheck golang.org/x/tools/cmd/goimports; do
	gobuild_cached build-lint "$(basename "$pkg")" "$mod" "$pkg" "$bindir/$(basename "$pkg")"
done
