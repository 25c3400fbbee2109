#!/usr/bin/env bash
# Builds the real Kueue controller manager, sigs.k8s.io/kueue/cmd/kueue, from the Go module
# proxy in its own tools module (test/tools/kueue: its Kubernetes libraries are not podpatch's),
# as hack/build-managers.sh builds the KubeRay operator. test/managers runs it against the test
# control plane; its CRDs come from the same module (config/components/crd/bases).
#
# Usage: hack/build-kueue.sh [BINDIR]     (BINDIR defaults to bin/ at the repo root)
# Prints the binary's path on standard output (progress goes to standard error).
#
# Cached: rebuilt only when its module changed (hack/lib/gobuild.sh, shared by the checkouts of
# this machine through ~/.cache/podpatch/bin).
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
# shellcheck source=lib/gobuild.sh
. "$root/hack/lib/gobuild.sh"
gobuild_cached build-kueue kueue "$mod" sigs.k8s.io/kueue/cmd/kueue "$out" || die "building kueue failed"
echo "$out"
