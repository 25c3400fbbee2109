package slots

// LargeBytesFor is the room for large bodies (Options.LargeBytes) that keeps podpatch
// under a container memory limit of limit bytes (DefaultLargeBytes when limit is not
// positive). While it is handled, a large review costs the policy engine up to
// largeReviewCost times its size (BenchmarkConcurrentMaxReviews); the Go runtime's soft limit
// (MemoryLimitShare of limit) less a baseline for the process and the ordinary reviews is
// shared out at that rate, and always holds one review of the largest size.
func LargeBytesFor(limit int64) int64 {
	if limit <= 0 {
		return DefaultLargeBytes
	}
	room := (int64(float64(limit)*MemoryLimitShare) - memoryBaseline) / largeReviewCost
	return max(room, MaxObjectSize+ReservationOverhead)
}

// MemoryLimitShare is the share of the container's memory limit given to the Go runtime as its
// soft limit: the heap grows up to it, so the rest is headroom for what the runtime does not
// count (the binary's pages) and for the GC to catch up before the kernel's OOM killer would.
// At 0.9 BenchmarkConcurrentMaxReviews peaked at 242 MiB of RSS, too close to 256 Mi.
const MemoryLimitShare = 0.85

const (
	// largeReviewCost is the memory, in multiples of its body, that a large review takes from
	// its arrival to its answer: the body, the engine's decoded tree and patched copy, the
	// JSONPatch and the encoded response.
	largeReviewCost = 32
	// memoryBaseline is the memory of podpatch without large reviews in flight: the binary,
	// the informer caches, the compiled policies and ordinary reviews.
	memoryBaseline = 64 << 20
)
