#!/usr/bin/env bash
# `make bench`: one command, one run, one report of the performance goals. Builds what it needs, then
#
#   1. Go benchmarks of each stage of the request path and of the whole handler (test/bench, a
#      module of its own: its plotting and load-generation dependencies stay out of podpatch's),
#   2. CPU profiles of the whole handler into docs/benchmarks/profiles/ (pprof + `go tool pprof -top`),
#      and heap profiles of the policy store into docs/benchmarks/heap/,
#   3. the end-to-end scale test (test/e2e TestScale) at the policy store's goal size: 10,000 policy
#      ConfigMaps over 500 namespaces, one changing every 100 ms while pods are created,
#   4. HTTPS load runs on loopback against `podpatch serve --policy-dir` and the two reference
#      servers (allow-only, idiomatic), the end-to-end run through kube-apiserver, and the
#      policy-store run: podpatch against kube-apiserver with 100 to 10,000 policy ConfigMaps
#      (test/bench/run),
#
# and regenerates docs/benchmarks/benchmarks.md, docs/benchmarks/benchmarks.png and docs/benchmarks/benchmarks-store.png. About
# 10 minutes on 2 cores once the control plane is built (the first `make control-plane` takes
# about 6 more).
#
# Usage: hack/bench.sh
# Environment: GO (go), BENCHTIME (1s), BENCH_COUNT (3: rounds of the whole-handler benchmarks),
#   PROFILE_BENCHTIME (3s), LOAD_DURATION (10s), LOAD_RATES (500,1000,2000,5000), LOAD_WORKERS (16),
#   SKIP_E2E (unset), SKIP_STORE (unset: the store run), SKIP_SCALE (unset: the scale test),
#   SCALE_CONFIGMAPS (10000), SCALE_NAMESPACES (500), STORE_COUNTS (100,1000,3000,10000).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
GO=${GO:-go}
BENCHTIME=${BENCHTIME:-1s}
BENCH_COUNT=${BENCH_COUNT:-3}
PROFILE_BENCHTIME=${PROFILE_BENCHTIME:-3s}
LOAD_DURATION=${LOAD_DURATION:-10s}
LOAD_RATES=${LOAD_RATES:-500,1000,2000,5000}
LOAD_WORKERS=${LOAD_WORKERS:-16}
SCALE_CONFIGMAPS=${SCALE_CONFIGMAPS:-10000}
SCALE_NAMESPACES=${SCALE_NAMESPACES:-500}
STORE_COUNTS=${STORE_COUNTS:-100,1000,3000,10000}

started=$(date +%s)
loadavg=$(cut -d' ' -f1-3 /proc/loadavg)
revision="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n $(git status --porcelain -- policies webhook cmd certs 2>/dev/null) ]]; then
	revision+=" with uncommitted changes in policies/, webhook/, cmd/ or certs/"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/podpatch-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
commands=$work/commands.txt
echo "# make bench runs hack/bench.sh, which runs:" >"$commands"

step() { printf '\n==> %s\n' "$*" >&2; }

# quote ARGS...: the arguments as a shell would need them typed.
quote() {
	local a out=()
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./=,:@%+-]+$ ]]; then
			out+=("$a")
		else
			out+=("'${a//\'/\'\\\'\'}'")
		fi
	done
	local line="${out[*]}"
	line=${line//$work/\$WORK}
	echo "${line//$root\//}"
}

# run CMD...: records CMD for the report (paths relative to the repository root, the scratch
# directory as $WORK) and runs it.
run() {
	quote "$@" >>"$commands"
	"$@"
}

step "building bin/podpatch, the reference servers and the control plane"
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
run hack/build-control-plane.sh bin
run "$GO" build -ldflags "-X main.version=$version" -o bin/podpatch ./cmd/podpatch
run "$GO" -C test/bench build -o "$root/bin/bench-allow" ./allow
run "$GO" -C test/bench build -o "$root/bin/bench-idiomatic" ./idiomatic
run "$GO" -C test/bench build -o "$work/bench-run" ./run

step "Go benchmarks (test/bench): stages and whole handler, 1 and 10 containers, 5 / 1,000 / 10,000 policies"
run "$GO" -C test/bench test . -run '^$' -bench '^Benchmark(Stages|Load)$' -benchmem -benchtime "$BENCHTIME" \
	-o "$work/bench.test" | tee "$work/gobench.txt"
# The whole-handler and reference benchmarks carry the goals: BENCH_COUNT rounds of all of them
# (rounds rather than -count, so that a change in the machine's other load reaches every
# configuration alike); the report takes the median.
for ((i = 1; i <= BENCH_COUNT; i++)); do
	run "$GO" -C test/bench test . -run '^$' -bench '^Benchmark(Handler|Reference)$' -benchmem -benchtime "$BENCHTIME" \
		-o "$work/bench.test" | tee -a "$work/gobench.txt"
done

step "Go benchmarks (policies, webhook): hostile input — the worst policy set lint accepts on a 3 MiB Pod"
run "$GO" test ./policies -run '^$' -bench '^BenchmarkWorstCase' -benchmem -benchtime 10x \
	-o "$work/policies.test" | tee -a "$work/gobench.txt"

step "Go benchmark (audit): drift of 10,000 pods in 500 namespaces against 1,000 policy ConfigMaps (docs/audit.md)"
run "$GO" test ./audit -run '^$' -bench '^BenchmarkAudit$' -benchmem -benchtime 3x -o "$work/audit.test" | tee docs/benchmarks/audit-benchmark.txt

step "Go benchmarks (webhook, webhook/policystore): the policy store, cold and one change, at 1,000 and 10,000 ConfigMaps"
run "$GO" test ./webhook -run '^$' -bench '^BenchmarkConcurrentMaxReviews$' -benchtime 20x \
	-o "$work/webhook.test" | tee -a "$work/gobench.txt"
run "$GO" test ./webhook/policystore -run '^$' -bench '^BenchmarkStore$' -benchmem -benchtime "$BENCHTIME" \
	-o "$work/policystore.test" | tee -a "$work/gobench.txt"

step "CPU profiles of the whole handler (docs/benchmarks/profiles/)"
rm -rf docs/benchmarks/profiles
mkdir -p docs/benchmarks/profiles
for p in "1 5" "1 10000" "10 5"; do
	read -r c n <<<"$p"
	name=handler-${c}c-${n}p
	run "$GO" -C test/bench test . -run '^$' -bench "^BenchmarkHandler/policies=$n/containers=$c\$" -benchtime "$PROFILE_BENCHTIME" \
		-o "$work/bench.test" -cpuprofile "$root/docs/benchmarks/profiles/$name.pprof" >/dev/null
	focus='bench_test\.serve$'
	for view in "" -cum; do
		out=docs/benchmarks/profiles/$name${view:+.cum}.txt
		echo "$(quote "$GO" tool pprof -top $view -relative_percentages -nodecount 60 -focus "$focus" "docs/benchmarks/profiles/$name.pprof") > $out" >>"$commands"
		"$GO" tool pprof -top $view -relative_percentages -nodecount 60 -focus "$focus" "docs/benchmarks/profiles/$name.pprof" >"$out" 2>/dev/null
	done
done

step "heap profiles of the policy store at 1,000 and 10,000 ConfigMaps (docs/benchmarks/heap/)"
rm -rf docs/benchmarks/heap
mkdir -p docs/benchmarks/heap
run env PODPATCH_HEAP_PROFILES="$root/docs/benchmarks/heap" "$GO" test ./webhook/policystore -run '^TestStoreHeapProfile$' -count=1 -v \
	-o "$work/policystore.test" | tee docs/benchmarks/heap/test.log
for n in 1000 10000; do
	out=docs/benchmarks/heap/store-$n.heap.txt
	echo "$(quote "$GO" tool pprof -top -sample_index inuse_space -nodecount 40 "$work/policystore.test" "docs/benchmarks/heap/store-$n.heap.pprof") > $out" >>"$commands"
	"$GO" tool pprof -top -sample_index inuse_space -nodecount 40 "$work/policystore.test" "docs/benchmarks/heap/store-$n.heap.pprof" >"$out" 2>/dev/null
done

scale=()
if [[ -z ${SKIP_SCALE:-} ]]; then
	step "end-to-end scale test: $SCALE_CONFIGMAPS policy ConfigMaps over $SCALE_NAMESPACES namespaces"
	scale_cmd=(env PODPATCH_SCALE_CONFIGMAPS="$SCALE_CONFIGMAPS" PODPATCH_SCALE_NAMESPACES="$SCALE_NAMESPACES"
		"$GO" test ./test/e2e -run '^TestScale$' -count=1 -v -timeout 20m)
	# A failing scale test is reported, not fatal: the report says what it logged.
	run "${scale_cmd[@]}" >"$work/scale.txt" 2>&1 || true
	grep -v '^        {' "$work/scale.txt" | tail -n 20 >&2
	scale=(--scale-log "$work/scale.txt" --scale-command "$(quote "${scale_cmd[@]}")")
fi

step "load runs, end-to-end run, store run and report"
args=(--root . --bin bin --work "$work" --go-bench "$work/gobench.txt" --profiles docs/benchmarks/profiles
	--heap-profiles docs/benchmarks/heap --commands "$commands" --out docs/benchmarks/benchmarks.md --plot docs/benchmarks/benchmarks.png
	--started "$started" --loadavg "$loadavg" --revision "$revision" --bench-rounds "$BENCH_COUNT"
	--duration "$LOAD_DURATION" --rates "$LOAD_RATES" --workers "$LOAD_WORKERS"
	--store-plot docs/benchmarks/benchmarks-store.png --store-counts "$STORE_COUNTS" "${scale[@]}")
if [[ -n ${SKIP_E2E:-} ]]; then
	args+=(--skip-e2e)
fi
if [[ -n ${SKIP_STORE:-} ]]; then
	args+=(--skip-store)
fi
# The driver reads the commands file, so record its own line first.
quote "$work/bench-run" "${args[@]}" >>"$commands"
"$work/bench-run" "${args[@]}"

step "done in $(($(date +%s) - started))s: docs/benchmarks/benchmarks.md, docs/benchmarks/benchmarks.png, docs/benchmarks/benchmarks-store.png, docs/benchmarks/profiles/"
