#!/usr/bin/env bash
# The long run of the engine's seeded property tests (docs/development.md, "The property tests'
# seeds"): each test below over thousands of consecutive seeds, every draw of each, where
# `make test` runs the commit's seed and the regression seeds only. Ends with a line per test:
# the seeds, how many ran clean, the seeds that failed (each with the command that checks the
# failing draw again) and the time; fails if any seed failed.
#
# Usage: hack/property-long.sh [TEST...]   (no TEST: every seeded property test below)
#
#   TestNamespaceRouteNeverLeavesEnforceOut  namespace policies never leave the platform's enforce
#                                            policies out; the fixed point (3,000 draws a seed)
#   TestReadmissionChangesNothing            the fixed point over every mix of layers, modes and
#                                            policies left out (1,500 draws a seed)
#   TestValidityProperty                     valid in, valid out; the fixed point (150 policy sets
#                                            on every fixture a seed)
#   TestKueuePlacementProperty               Kueue decides placement; the fixed point (600 Pods a
#                                            seed)
#
# Environment:
#   PODPATCH_PROPERTY_SEEDS  seeds per test (default 2000)
#   PODPATCH_PROPERTY_SEED   the first seed (default: from the commit, as the Makefile's
#                            PROPERTY_SEED, so that a run reproduces from the commit)
#   PROPERTY_PARALLEL        seeds run at once (default: the CPUs, nproc)
#   PROPERTY_LOG_DIR         where each test's full output is kept (default: a new temporary dir)
set -uo pipefail

# All in one function, called on the last line: bash has then read the whole script before it
# runs any of it, so an edit to this file during a long run does not change the run.
main() {
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	cd "$root" || exit 1
	local tests=("$@")
	if [ ${#tests[@]} -eq 0 ]; then
		tests=(TestNamespaceRouteNeverLeavesEnforceOut TestReadmissionChangesNothing TestValidityProperty TestKueuePlacementProperty)
	fi
	local seeds=${PODPATCH_PROPERTY_SEEDS:-2000}
	local first=${PODPATCH_PROPERTY_SEED:-$(printf '%d' "0x$(git rev-parse --short=15 HEAD 2>/dev/null || echo 1)")}
	local parallel=${PROPERTY_PARALLEL:-$(nproc)}
	local logs=${PROPERTY_LOG_DIR:-$(mktemp -d -t podpatch-property-long.XXXXXX)}
	mkdir -p "$logs"
	echo "property-long: ${#tests[@]} tests, $seeds seeds each from $first, $parallel at once; logs in $logs"
	if ! go test -c -o "$logs/policies.test" ./policies; then
		echo "property-long: the policies tests do not build" >&2
		exit 1
	fi
	local failed=0 summary=()
	for t in "${tests[@]}"; do
		local log="$logs/$t.log" start end
		start=$(date +%s)
		# GOGC: the runs allocate much and keep little.
		(cd policies && GOGC=400 PODPATCH_PROPERTY_SEED="$first" PODPATCH_PROPERTY_SEEDS="$seeds" \
			"$logs/policies.test" -test.run "^$t\$" -test.v -test.parallel "$parallel" -test.timeout 48h) >"$log" 2>&1
		local rc=$?
		end=$(date +%s)
		local clean bad
		clean=$(grep -cE "^    --- PASS: $t/seed=[0-9]+ " "$log")
		bad=$(grep -oE "^    --- FAIL: $t/seed=[0-9]+ " "$log" | grep -oE '[0-9]+' | sort -n | tr '\n' ' ')
		local nbad
		nbad=$(echo "$bad" | wc -w)
		if [ "$rc" -ne 0 ] || [ "$nbad" -gt 0 ] || [ "$clean" -ne "$seeds" ]; then
			failed=1
		fi
		summary+=("$t: $seeds seeds from $first: $clean clean, $nbad failed${bad:+ ($bad)}, $((end - start)) s (exit $rc)")
		grep -oE "reproduce: [^)]*" "$log" | sort -u | sed 's/^/  /' >"$logs/$t.reproduce"
	done
	echo
	for line in "${summary[@]}"; do
		echo "$line"
	done
	for t in "${tests[@]}"; do
		if [ -s "$logs/$t.reproduce" ]; then
			echo "$t, the failing draws:"
			cat "$logs/$t.reproduce"
		fi
	done
	exit "$failed"
}

main "$@"
