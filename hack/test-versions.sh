#!/usr/bin/env bash
# The version matrix (docs/development.md "The version matrix"): podpatch's
# version-dependent tests against every supported Kubernetes minor, a preview of the next one and
# the alpha feature gates, each lane a command of its own.
#
# Usage: hack/test-versions.sh [LANE...]      (no LANE: every lane, in the order below)
#
#   lane      kube-apiserver (and kube-controller-manager, kube-scheduler)      tests
#   1.33      v1.33.13, built from test/tools/kube-v1.33                        versions property e2e managers
#   1.34      v1.34.4, built from test/tools/kube-v1.34                         versions property native
#   1.34-emu  bin/'s v1.37.2 with --emulated-version=1.34                       versions property
#   1.35-emu  bin/'s v1.37.2 with --emulated-version=1.35                       versions property
#   1.36-emu  bin/'s v1.37.2 with --emulated-version=1.36                       versions property native
#   1.37      bin/'s v1.37.2                                                    versions property e2e managers
#   alpha     bin/'s v1.37.2 with --feature-gates=AllAlpha=true,AllBeta=true   versions property
#             (so every gate of policies/versions' Fields on; TestVersionTable expects them kept)
#   1.38      v1.38.0-beta.0, built from test/tools/kube-v1.38: the preview     versions property
#
# The tests: versions = test/e2e's TestVersionTable and TestFieldsNeverClaimed; property =
# test/property (valid in, valid out, PODPATCH_PROPERTY_SEED as `make test` sets it); e2e = the
# whole of test/e2e (which includes the two version tests and the native ones); managers =
# test/managers' real Dask operator and KubeRay (TestDaskOperator, TestKubeRay); native =
# test/e2e's TestNativeDifferential and TestNativeExamples, the MutatingAdmissionPolicies
# podpatch map compiles against the webhook: v1 on 1.36, and v1beta1 on the real 1.34 with its
# gate and API on (native_flags). An emulated 1.34 or 1.35 cannot serve them: v1.37.2's plugin
# watches the v1 API, which those versions do not have, and the server never gets ready.
#
# A lane runs its binaries through test/cluster's PODPATCH_KUBE_BIN_DIR (etcd, kwok and kubectl
# stay bin/'s) and its flags through PODPATCH_APISERVER_FLAGS. The 1.38 lane is a preview:
# podpatch does not support 1.38, so its failures are reported in the table but do not fail the
# script. The script ends with a table (lane, tests, result, seconds) and fails if any lane
# other than the preview failed.
#
# Environment:
#   KUBE_VERSIONS_BIN       where the other minors' binaries go: KUBE_VERSIONS_BIN/kube-v1.33 ...
#                           (default bin/); built by hack/build-kube-version.sh when missing
#   PODPATCH_PROPERTY_SEED  the property test's seed (default: from the commit, as the Makefile)
#   VERSIONS_LOG_DIR        where each run's full output is kept (default: a new temporary dir)
set -uo pipefail

# All in one function, called on the last line: bash has then read the whole script before it
# runs any of it, so an edit to this file during a long run does not change the run.
main() {
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	cd "$root" || exit 1
	GO=${GO:-go}

	die() {
		echo "test-versions: error: $*" >&2
		exit 1
	}

	all_lanes=(1.33 1.34 1.34-emu 1.35-emu 1.36-emu 1.37 alpha 1.38)
	lanes=("$@")
	((${#lanes[@]})) || lanes=("${all_lanes[@]}")
	for l in "${lanes[@]}"; do
		[[ " ${all_lanes[*]} " == *" $l "* ]] || die "unknown lane '$l' (lanes: ${all_lanes[*]})"
	done

	for b in kube-apiserver etcd kube-controller-manager kube-scheduler kwok kwok.yaml; do
		[[ -e bin/$b ]] || die "bin/$b is missing: run \`make control-plane\`"
	done
	versions_bin=${KUBE_VERSIONS_BIN:-$root/bin}
	seed=${PODPATCH_PROPERTY_SEED:-$(printf '%d' "0x$(git rev-parse --short=15 HEAD 2>/dev/null || echo 1)")}
	logs=${VERSIONS_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/podpatch-versions-XXXXXX")}
	mkdir -p "$logs" || die "cannot create $logs"

	# The alpha lane: every alpha and beta feature gate on. AllAlpha turns on StorageVersionAPI,
	# whose API group is off by default; without it kube-apiserver blocks its own writes ("wait for
	# storage version registration to complete") and never becomes ready, hence the runtime-config
	# (docs/development.md "The version matrix").
	alpha_flags="feature-gates=AllAlpha=true,AllBeta=true;runtime-config=internal.apiserver.k8s.io/v1alpha1=true"

	# kubebin LANE: the directory of the lane's own kube-apiserver, kube-controller-manager and
	# kube-scheduler, built when missing ("" for bin/'s).
	kubebin() {
		local dir
		case $1 in
		1.33 | 1.34 | 1.38) dir=test/tools/kube-v$1 ;;
		*) return 0 ;;
		esac
		hack/build-kube-version.sh "$dir" "$versions_bin/kube-v$1" || return 1
	}

	# MutatingAdmissionPolicy's gate and beta API, off by default before 1.36: the native suite's.
	native_flags="feature-gates=MutatingAdmissionPolicy=true;runtime-config=admissionregistration.k8s.io/v1beta1=true"

	# flags LANE SUITE: its PODPATCH_APISERVER_FLAGS.
	flags() {
		local f=
		case $1 in
		*-emu) f="emulated-version=${1%-emu}" ;;
		alpha) f=$alpha_flags ;;
		esac
		if [[ $2 == native && $1 == 1.34 ]]; then
			f=${f:+$f;}$native_flags
		fi
		echo "$f"
	}

	# suites LANE
	suites() {
		case $1 in
		1.33 | 1.37) echo versions property e2e managers ;;
		1.34 | 1.36-emu) echo versions property native ;;
		*) echo versions property ;;
		esac
	}

	managers_venv=
	rows=()
	failed=0

	# run LANE SUITE BINDIR FLAGS: one suite of a lane; appends its row.
	run() {
		local lane=$1 suite=$2 bindir=$3 fl=$4 log rc start secs cmd
		log=$logs/$lane-$suite.log
		case $suite in
		versions) cmd=("$GO" test -count=1 -timeout 15m -v -run '^(TestVersionTable|TestFieldsNeverClaimed)$' ./test/e2e) ;;
		property) cmd=("$GO" test -count=1 -timeout 20m -run '^TestValidInValidOut$' ./test/property) ;;
		e2e) cmd=("$GO" test -count=1 -timeout 40m ./test/e2e) ;;
		managers) cmd=("$GO" test -count=1 -timeout 40m -v -run '^(TestDaskOperator|TestKubeRay)$' ./test/managers) ;;
		native) cmd=("$GO" test -count=1 -timeout 20m -v -run '^(TestNativeDifferential|TestNativeExamples)$' ./test/e2e) ;;
		esac
		echo
		echo "=== lane $lane: $suite (PODPATCH_KUBE_BIN_DIR=${bindir:-bin/} PODPATCH_APISERVER_FLAGS=${fl:-none}; log $log)"
		echo "=== ${cmd[*]}"
		start=$SECONDS
		env PODPATCH_E2E=required PODPATCH_PROPERTY_SEED="$seed" PODPATCH_KUBE_BIN_DIR="$bindir" \
			PODPATCH_APISERVER_FLAGS="$fl" PODPATCH_MANAGERS=1 PODPATCH_MANAGERS_VENV="$managers_venv" \
			"${cmd[@]}" >"$log" 2>&1
		rc=$?
		secs=$((SECONDS - start))
		# The version tests' own log lines (the version the API server reports), the outcome and,
		# on failure, what failed.
		grep -E '^\s+versions_test.go:[0-9]+: Kubernetes |^(ok|FAIL|---)|^--- FAIL|^\s+--- FAIL|property: PODPATCH_PROPERTY_SEED' "$log" | head -40
		local result=pass
		if ((rc != 0)); then
			result=FAIL
			if [[ $lane == 1.38 ]]; then
				result="FAIL (preview: not counted)"
			else
				failed=1
			fi
			echo "--- lane $lane: $suite failed (exit $rc); the failures:"
			# testify's Error, Test and Messages lines; the property test's refusal classes; the
			# control plane's own start failure.
			awk '
				/^[ \t]*--- FAIL/ { print; next }
				/^[ \t]+(Error|Test|Messages):/ { print; more = /Error:/ ? 2 : 0; next }
				more > 0 && /^ +\t +\t/ { print; more--; next }
				{ more = 0 }
				/^[ \t]+### \[|^[ \t]+server: |^[ \t]+count [0-9]+; reproduce|^(e2e|property|managers): / { print }
			' "$log" | head -60
		fi
		echo "=== lane $lane: $suite: $result in ${secs}s"
		rows+=("$(printf '%-9s %-9s %-28s %6s' "$lane" "$suite" "$result" "$secs")")
	}

	for lane in "${lanes[@]}"; do
		bindir=
		if [[ $lane == 1.33 || $lane == 1.34 || $lane == 1.38 ]]; then
			bindir=$(kubebin "$lane" | tail -1) || {
				echo "test-versions: lane $lane: its binaries did not build (above)" >&2
				rows+=("$(printf '%-9s %-9s %-28s %6s' "$lane" build FAIL -)")
				[[ $lane == 1.38 ]] || failed=1
				continue
			}
		fi
		fl=$(flags "$lane" "")
		echo
		echo "##### lane $lane: kube-apiserver $("${bindir:-bin}/kube-apiserver" --version 2>&1)${fl:+, flags $fl}"
		for suite in $(suites "$lane"); do
			if [[ $suite == managers && -z $managers_venv ]]; then
				managers_venv=$(hack/build-managers.sh bin) || {
					rows+=("$(printf '%-9s %-9s %-28s %6s' "$lane" managers "FAIL (build-managers)" -)")
					failed=1
					continue
				}
			fi
			run "$lane" "$suite" "$bindir" "$(flags "$lane" "$suite")"
		done
	done

	echo
	echo "The version matrix (logs in $logs; property seed $seed)"
	printf '%-9s %-9s %-28s %6s\n' lane tests result seconds
	printf '%s\n' "${rows[@]}"
	exit $failed
}

main "$@"
