#!/usr/bin/env bash
# Builds the real Kueue controller manager, sigs.k8s.io/kueue/cmd/kueue, from the Go module
# proxy in its own tools module (test/tools/kueue: its Kubernetes libraries are not podpatch's),
# as hack/build-managers.sh builds the KubeRay operator. test/managers runs it against the test
# control plane; its CRDs come from the same module (config/components/crd/bases).
#
# Usage: hack/build-kueue.sh [BINDIR]     (BINDIR defaults to bin/ at the repo root)
# Prints the binary's path on standard output (progress goes to standard error).
#
# Cached: rebuilt only when missing or older than its module's go.mod/go.sum.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}

say() { echo "build-kueue: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

bindir=${1:-$root/bin}
mkdir -p "$bindir" || die "cannot create $bindir"
bindir=$(cd "$bindir" && pwd)

mod=$root/test/tools/kueue
out=$bindir/kueue
if [[ -x $out && ! $mod/go.mod -nt $out && ! $mod/go.sum -nt $out ]]; then
	say "$out is up to date"
else
	say "building $out (module test/tools/kueue) ..."
	start=$SECONDS
	tmp=$out.tmp.$$
	trap 'rm -f "$tmp"' EXIT
	(cd "$mod" && GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly" CGO_ENABLED=0 \
		"$GO" build -trimpath -ldflags="-s -w" -o "$tmp" sigs.k8s.io/kueue/cmd/kueue) ||
		die "building kueue failed"
	mv -f "$tmp" "$out"
	trap - EXIT
	say "built $out in $((SECONDS - start))s"
fi
echo "$out"
