#!/usr/bin/env bash
# Builds one Kubernetes minor of the version matrix (make test-versions, docs/development.md "The
# version matrix") from source, with nothing but the Go toolchain and the Go module proxy:
#
#   BINDIR/kube-apiserver            k8s.io/kubernetes/cmd/kube-apiserver, module VERSION_DIR
#   BINDIR/kube-controller-manager   k8s.io/kubernetes/cmd/kube-controller-manager, same module
#   BINDIR/kube-scheduler            k8s.io/kubernetes/cmd/kube-scheduler, same module
#
# each stamped with the module's k8s.io/kubernetes version (-X, as hack/build-control-plane.sh
# does), so that /version, and the webhook's discovery of it, says what the binary is.
#
# Usage: hack/build-kube-version.sh VERSION_DIR [BINDIR]
#   VERSION_DIR   a module under test/tools, e.g. test/tools/kube-v1.33
#   BINDIR        defaults to bin/<basename of VERSION_DIR> at the repo root (bin/kube-v1.33)
#
# etcd, kwok and kubectl are not built here: the lanes take them from bin/ (test/cluster
# PODPATCH_KUBE_BIN_DIR=BINDIR replaces only the three binaries above). Binaries are cached by
# hack/lib/gobuild.sh (~/.cache/podpatch/bin) like the rest of the control plane; a cold build of
# the three takes about 10 minutes on 2 cores. The script prints BINDIR on standard output.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}

die() {
	echo "build-kube-version: error: $*" >&2
	exit 1
}

[[ $# -ge 1 && $# -le 2 ]] || die "usage: hack/build-kube-version.sh VERSION_DIR [BINDIR]"
command -v "$GO" >/dev/null 2>&1 || die "Go toolchain '$GO' not found in PATH (set GO=/path/to/go)"

kdir=$1
[[ $kdir == /* ]] || kdir=$root/$kdir
[[ -f $kdir/go.mod ]] || die "$kdir/go.mod is missing"
kdir=$(cd "$kdir" && pwd)
bindir=${2:-$root/bin/$(basename "$kdir")}
mkdir -p "$bindir" || die "cannot create $bindir"
bindir=$(cd "$bindir" && pwd)

export GOWORK=off
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

# shellcheck source=lib/gobuild.sh
. "$root/hack/lib/gobuild.sh"

# A module whose go line is newer than this machine's Go (1.38 requires Go 1.27) is built with that
# toolchain: GOTOOLCHAIN=goX.Y.Z makes the go command fetch it from the module proxy once.
want=$(sed -n 's/^go \([0-9][0-9.]*\)$/\1/p' "$kdir/go.mod")
have=$("$GO" env GOVERSION) || die "cannot run '$GO env GOVERSION'"
have=${have#go}
if [[ -n $want && $(printf '%s\n%s\n' "$have" "$want" | sort -V | head -1) != "$want" ]]; then
	echo "build-kube-version: $kdir needs Go $want (this Go is $have): GOTOOLCHAIN=go$want" >&2
	export GOTOOLCHAIN=go$want
fi

kver=$(cd "$kdir" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes) ||
	die "cannot read the k8s.io/kubernetes version from $kdir/go.mod (a Go older than the module's go line?)"
kube_ldflags "$kver" || die "unexpected k8s.io/kubernetes version '$kver'"

# The cache entry is named after the version too (kube-v1.33-kube-apiserver-KEY): gobuild_cached
# keeps one entry per name, and bin/'s own kube-apiserver must not be evicted by another minor's.
for name in kube-apiserver kube-controller-manager kube-scheduler; do
	gobuild_cached build-kube-version "$(basename "$kdir")-$name" "$kdir" "k8s.io/kubernetes/cmd/$name" "$bindir/$name" "${kldflags[@]}" || exit 1
done
echo "$bindir"
