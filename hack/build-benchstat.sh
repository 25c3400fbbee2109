#!/usr/bin/env bash
# Builds benchstat and benchguard — golang.org/x/perf, pinned in test/tools/benchstat — from the Go
# module proxy into BINDIR (default bin/), once: a binary is rebuilt only when it is missing or
# older than the module's go.mod, go.sum or (benchguard) its source.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
bindir=${1:-$root/bin}
mkdir -p "$bindir"
bindir=$(cd "$bindir" && pwd) # the builds below run in the tools module's directory
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" CGO_ENABLED=0
mod=$root/test/tools/benchstat
for pkg in golang.org/x/perf/cmd/benchstat ./benchguard; do
	bin=$bindir/$(basename "$pkg")
	if [[ -x $bin && $bin -nt $mod/go.mod && $bin -nt $mod/go.sum && $bin -nt $mod/benchguard/main.go ]]; then
		continue
	fi
	echo "build-benchstat: building $(basename "$pkg")" >&2
	(cd "$mod" && "$GO" build -o "$bin" "$pkg")
done
