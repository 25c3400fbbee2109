// Package bench is podpatch's performance harness: the pod fixtures and generated
// policy sets every measurement shares, the two reference webhooks podpatch is compared with
// (allow-only and idiomatic), the HTTPS load runner, the end-to-end run through a real
// kube-apiserver, and the report. hack/bench.sh (`make bench`) drives it all in one run and
// regenerates docs/benchmarks/benchmarks.md and docs/benchmarks/benchmarks.png.
//
// Everything here measures podpatch through its exported API and its real binary, so the
// numbers follow whatever the hot path (policies/, webhook/) currently is.
package bench
