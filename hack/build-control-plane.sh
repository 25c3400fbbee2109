#!/usr/bin/env bash
# Builds the control plane the end-to-end tests run against (controller-runtime's envtest), from
# source, with nothing but the Go toolchain and the Go module proxy:
#
#   BINDIR/kube-apiserver            k8s.io/kubernetes/cmd/kube-apiserver, module test/tools/kube-apiserver
#   BINDIR/kube-controller-manager   k8s.io/kubernetes/cmd/kube-controller-manager, same module
#                                    (test/managers: Deployments, ReplicaSets and Jobs make Pods)
#   BINDIR/kube-scheduler            k8s.io/kubernetes/cmd/kube-scheduler, same module and version
#                                    (test/cluster StartScheduler: Pods are bound to the lab's Nodes)
#   BINDIR/kwok                      sigs.k8s.io/kwok/cmd/kwok, module test/tools/kwok (fake Nodes;
#                                    Pods bound to them are brought to Running without a kubelet)
#   BINDIR/kwok.yaml                 kwok's default Node and Pod stages (kwokctl's: node-initialize,
#                                    node-heartbeat, pod-ready, pod-complete, pod-delete), from the
#                                    same module: `kwok --config BINDIR/kwok.yaml`
#   BINDIR/etcd                      go.etcd.io/etcd/server/v3/etcdmain,  module test/tools/etcd
#   BINDIR/kubectl                   k8s.io/kubernetes/cmd/kubectl, module test/tools/kubectl (same
#                                    k8s.io/kubernetes version; the guides' transcripts, test/docs)
#
# Usage: hack/build-control-plane.sh [BINDIR]      (BINDIR defaults to bin/ at the repo root)
#
# A binary is rebuilt only when its module's go.mod, go.sum or .go files, the Go version or the
# flags changed (hack/lib/gobuild.sh; a build of the same key by another checkout of this machine
# is copied from ~/.cache/podpatch/bin instead); otherwise the script says it is up to date. A cold build of
# kube-apiserver takes several minutes (about 5 on 2 cores). Point envtest at the result with
# KUBEBUILDER_ASSETS=BINDIR or envtest.Environment{BinaryAssetsDirectory: BINDIR}.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=$root/test/tools
GO=${GO:-go}

die() {
	echo "build-control-plane: error: $*" >&2
	exit 1
}

command -v "$GO" >/dev/null 2>&1 || die "Go toolchain '$GO' not found in PATH (set GO=/path/to/go)"

bindir=${1:-$root/bin}
mkdir -p "$bindir" || die "cannot create $bindir"
bindir=$(cd "$bindir" && pwd)

# The modules under test/tools are built on their own: no go.work from above may pull them into
# a workspace, and go.sum must already be complete (a fresh clone must not need `go mod tidy`).
export GOWORK=off
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

# shellcheck source=lib/gobuild.sh
. "$root/hack/lib/gobuild.sh"

# build NAME MODULE_DIR PACKAGE [LDFLAGS...]: builds PACKAGE inside MODULE_DIR into BINDIR/NAME.
build() {
	local name=$1 dir=$2 pkg=$3
	shift 3
	gobuild_cached build-control-plane "$name" "$dir" "$pkg" "$bindir/$name" "$@" || exit 1
}

# kube-apiserver reports the Kubernetes version it was built from: release builds stamp it with
# -X; an unstamped `go build` would call itself v0.0.0-master.
kdir=$tools/kube-apiserver
kver=$(cd "$kdir" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes) ||
	die "cannot read the k8s.io/kubernetes version from $kdir/go.mod"
kube_ldflags "$kver" || die "unexpected k8s.io/kubernetes version '$kver'"

build kube-apiserver "$kdir" k8s.io/kubernetes/cmd/kube-apiserver "${kldflags[@]}"
build kube-controller-manager "$kdir" k8s.io/kubernetes/cmd/kube-controller-manager "${kldflags[@]}"
build kube-scheduler "$kdir" k8s.io/kubernetes/cmd/kube-scheduler "${kldflags[@]}"
build etcd "$tools/etcd" .
kubectlver=$(cd "$tools/kubectl" && "$GO" list -m -f '{{.Version}}' k8s.io/kubernetes) ||
	die "cannot read the k8s.io/kubernetes version from $tools/kubectl/go.mod"
[[ $kubectlver == "$kver" ]] || die "test/tools/kubectl requires k8s.io/kubernetes $kubectlver, the control plane $kver: keep them at one version"
build kubectl "$tools/kubectl" k8s.io/kubernetes/cmd/kubectl "${kldflags[@]}"
build kwok "$tools/kwok" sigs.k8s.io/kwok/cmd/kwok

# kwok run on its own (not by kwokctl) has no stages unless its --config names some: collect the
# default ones from the kwok module the binary was built from. `go mod download` (not `go list -m`,
# whose .Dir is empty when the module is not in this machine's module cache, as on a machine whose
# kwok binary came from the build cache) fetches the module if needed and prints where it is.
kwokdir=$(cd "$tools/kwok" && "$GO" mod download -json sigs.k8s.io/kwok | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p') ||
	die "cannot download the sigs.k8s.io/kwok module of $tools/kwok"
[[ -n $kwokdir && -d $kwokdir ]] || die "go mod download gave no directory for sigs.k8s.io/kwok in $tools/kwok"
stages=$kwokdir/kustomize/stage
if [[ ! -f $bindir/kwok.yaml || $bindir/kwok -nt $bindir/kwok.yaml ]]; then
	{
		first=1
		for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
			pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
			[[ -f $stages/$f ]] || die "kwok stage $stages/$f is missing"
			((first)) || echo "---"
			first=0
			cat "$stages/$f"
		done
	} >"$bindir/kwok.yaml.tmp.$$" && mv -f "$bindir/kwok.yaml.tmp.$$" "$bindir/kwok.yaml"
	echo "build-control-plane: wrote $bindir/kwok.yaml (kwok's default stages)"
fi
