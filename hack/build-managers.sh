#!/usr/bin/env bash
# Builds and installs the real cluster managers that test/managers runs against the test
# control plane, with only the Go toolchain, Python 3 (venv, pip) and the package registries:
#
#   BINDIR/ray-operator   the KubeRay operator, github.com/ray-project/kuberay/ray-operator,
#                         module test/tools/ray-operator (its CRDs come from the same module)
#   a virtualenv          test/managers/requirements*.txt: the Dask Kubernetes operator (kopf),
#                         dask-gateway-server, pyspark (spark-submit and Spark's jars) and Flink's
#                         jars (apache-flink-libraries, without dependencies). Java 17 runs Spark
#                         and Flink.
#
# Usage: hack/build-managers.sh [BINDIR]     (BINDIR defaults to bin/ at the repo root)
# Prints the virtualenv's path on standard output (progress goes to standard error).
#
# Both are cached: the operator is rebuilt only when its module changed (hack/lib/gobuild.sh,
# shared by the checkouts of this machine through ~/.cache/podpatch/bin); the virtualenv lives in $PODPATCH_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/podpatch) under a name keyed by the requirements' hash, so a
# change of pins makes a new one and an unchanged one is reused as is. pip's own cache keeps
# the downloads (about 800 MB, mostly pyspark and Flink's jars) between virtualenvs.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GO=${GO:-go}
PYTHON=${PYTHON:-python3}

say() { echo "build-managers: $*" >&2; }
die() {
	say "error: $*"
	exit 1
}

bindir=${1:-$root/bin}
mkdir -p "$bindir" || die "cannot create $bindir"
bindir=$(cd "$bindir" && pwd)

# The KubeRay operator, from its own module (its Kubernetes libraries are older than podpatch's).
mod=$root/test/tools/ray-operator
out=$bindir/ray-operator
# shellcheck source=lib/gobuild.sh
. "$root/hack/lib/gobuild.sh"
gobuild_cached build-managers ray-operator "$mod" github.com/ray-project/kuberay/ray-operator "$out" ||
	die "building ray-operator failed"

# The virtualenv, keyed by the pins.
reqs=$root/test/managers/requirements.txt
nodeps=$root/test/managers/requirements-nodeps.txt
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set PYTHON=/path/to/python3.11)"
command -v java >/dev/null || die "java not found: Spark and Flink need Java 17"
key=$(cat "$reqs" "$nodeps" <("$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
cache=${PODPATCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/podpatch}
venv=$cache/managers-venv-$key
if [[ -f $venv/.complete ]]; then
	say "$venv is up to date"
else
	say "creating $venv (pip downloads about 800 MB on a cold cache) ..."
	start=$SECONDS
	rm -rf "$venv"
	mkdir -p "$cache"
	"$PYTHON" -m venv "$venv" || die "python3 -m venv failed"
	"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$reqs" >&2 || die "pip install -r $reqs failed"
	"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$nodeps" >&2 || die "pip install -r $nodeps failed"
	touch "$venv/.complete"
	say "created $venv in $((SECONDS - start))s"
fi
echo "$venv"
