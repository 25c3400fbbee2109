#!/usr/bin/env bash
# `make bench-compare` (full) and `make bench-check` (quick, part of `make test`): the in-process
# benchmarks against the committed baseline, docs/benchmarks/baseline.txt (docs/development.md,
# "Benchmark regressions").
#
#   full:     every benchmark below COUNT (6) times; benchstat prints the comparison and
#             benchguard fails on a significant (U test, alpha 0.05) increase of the median beyond
#             +15 % sec/op or +10 % allocs/op or B/op.
#   quick:    each benchmark once, a fixed number of iterations; allocs/op only (a count the
#             machine's load does not change), beyond +10 %.
#   baseline: the full run, written to the baseline file (run it on the machine you compare on).
#
# Usage: hack/bench-compare.sh [full|quick|baseline]
# Environment: GO (go), BINDIR (bin), BASELINE (docs/benchmarks/baseline.txt), COUNT (6),
#   BENCHTIME (1s; quick: 50x), SEC_THRESHOLD (15), ALLOCS_THRESHOLD (10), BYTES_THRESHOLD (10).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
mode=${1:-full}
BINDIR=${BINDIR:-$root/bin}
BASELINE=${BASELINE:-docs/benchmarks/baseline.txt}
COUNT=${COUNT:-6}
SEC_THRESHOLD=${SEC_THRESHOLD:-15}
ALLOCS_THRESHOLD=${ALLOCS_THRESHOLD:-10}
BYTES_THRESHOLD=${BYTES_THRESHOLD:-10}
case $mode in
full | baseline) BENCHTIME=${BENCHTIME:-1s} ;;
quick)
	BENCHTIME=${BENCHTIME:-50x}
	COUNT=1
	;;
*)
	echo "usage: $0 [full|quick|baseline]" >&2
	exit 2
	;;
esac
hack/build-benchstat.sh "$BINDIR"
work=$(mktemp -d "${TMPDIR:-/tmp}/podpatch-bench-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$work/new.txt

# The benchmarks: the whole handler (webhook, the example policies), the engine (test/bench:
# Apply with 5 and 1,000 policies, 1 and 10 containers) and the hostile worst case (policies).
# BenchmarkWorstCase takes ~0.1 s per iteration: a tenth of the iterations.
worst=$BENCHTIME
if [[ $mode == quick ]]; then
	worst=5x # one-time costs (the first decode of the 64 policies) amortised as in the baseline
elif [[ $BENCHTIME =~ ^([0-9]+)x$ ]]; then
	worst=$(((BASH_REMATCH[1] + 9) / 10))x
fi
echo "bench-compare ($mode): -count $COUNT -benchtime $BENCHTIME" >&2
"$GO" test -run '^$' -bench '^BenchmarkHandler$' -benchmem -benchtime "$BENCHTIME" -count "$COUNT" ./webhook | tee "$out"
"$GO" -C test/bench test -run '^$' -bench '^BenchmarkApply$' -benchmem -benchtime "$BENCHTIME" -count "$COUNT" . | tee -a "$out"
"$GO" test -run '^$' -bench '^BenchmarkWorstCase$' -benchmem -benchtime "$worst" -count "$COUNT" ./policies | tee -a "$out"

if [[ $mode == baseline ]]; then
	{
		echo "# The baseline of make bench-compare (hack/bench-compare.sh): written by \`make bench-baseline\`"
		echo "# at $(git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)."
		echo "# sec/op is of that machine: compare on the machine that wrote it. allocs/op and B/op are not."
		cat "$out"
	} >"$BASELINE"
	echo "wrote $BASELINE" >&2
	exit 0
fi
if [[ $mode == full ]]; then
	"$BINDIR/benchstat" "$BASELINE" "$out" || true
	exec "$BINDIR/benchguard" -threshold "sec/op=$SEC_THRESHOLD" -threshold "allocs/op=$ALLOCS_THRESHOLD" \
		-threshold "B/op=$BYTES_THRESHOLD" -exact allocs/op "$BASELINE" "$out"
fi
exec "$BINDIR/benchguard" -threshold "allocs/op=$ALLOCS_THRESHOLD" -exact allocs/op "$BASELINE" "$out"
