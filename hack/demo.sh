#!/usr/bin/env bash
# Renders the example policies onto objects shaped as each cluster manager generates them and
# shows, per object, which policy set which field.
set -euo pipefail
podpatch=${1:-bin/podpatch}
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=$root/policies/testdata/fixtures
for dir in dask-operator dask-gateway spark kuberay flink; do
	echo "=== $dir"
	for f in "$fixtures/$dir"/*.yaml; do
		"$podpatch" render --explain --policies "$root/manifests/examples" -f "$f" |
			awk '/^# podpatch:/{print; next} /podpatch.io\/applied:/{print "    " $0}'
	done
done
echo
echo "Full output of one object:"
"$podpatch" render --policies "$root/manifests/examples" -f "$fixtures/dask-operator/worker-pod.yaml"
