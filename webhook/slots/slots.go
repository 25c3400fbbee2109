// Package slots bounds what the admission requests in flight hold: room for their bodies,
// reserved by size from two pools, and a number of handling slots (reference §5). It sizes the
// room for large bodies from the container's memory limit (LargeBytesFor). The admission
// adapter (package webhook) takes them around every request; the policy store's compile slots
// are Slots too.
package slots

import (
	"context"

	"golang.org/x/sync/semaphore"
)

// MaxObjectSize bounds one object of a review, as JSON. kube-apiserver accepts request bodies
// of at most 3 MiB (MaxRequestBodyBytes in k8s.io/apiserver's server config: twice etcd's
// 1.5 MiB request limit, for JSON is larger than the protobuf etcd stores), and an object
// reaches webhooks as JSON, with the defaults the API server set (a YAML or protobuf request
// body too): 4 MiB leaves a quarter for that. An object larger than that could not be stored
// in etcd anyway.
const MaxObjectSize = 4 << 20

// MaxReviewSize bounds a request body: an UPDATE's review carries the object twice (object and
// oldObject, each up to MaxObjectSize) with the request's kind, resource, userInfo and options,
// for which 1 MiB is left (as in controller-runtime's 7 MiB: two objects of 3 MiB and 1 MiB).
// A Pod grown by ordinary updates to 2.3 MB makes every later review of it 4.7 MB: a bound of
// one object would leave its updates unread (reference §5).
const MaxReviewSize = 2*MaxObjectSize + 1<<20

// Slots bound what the requests in flight hold, so that memory stays under the container's
// limit and no class of client can starve the API server's ordinary reviews (reference §5):
//
//   - Bytes. Before its body is read a request reserves room for it, the announced
//     Content-Length (MaxObjectSize when none is announced, or for a larger body), until its
//     answer is written: the bodies in memory, and the policy engine's work on them (which
//     grows with the body), are bounded by the reservations. A body larger than one object
//     can only be an update's two objects (a larger object is answered unhandled), on which
//     only the platform's enforce policies apply: per byte, the engine's work on it is a
//     quarter of a creation's, and on the largest update half of what it is on the largest
//     creation (BenchmarkMaxUpdateReview), so it reserves as the largest creation does. Ordinary bodies, up to OrdinaryBody, reserve from their
//     own pool of OrdinaryBytes, so that large bodies, from whomever, never hold the room
//     ordinary reviews need; larger ones from a pool of LargeBytes.
//   - Count. Once its body is read a request takes one of MaxInFlight handling slots. A
//     client that sends its body slowly holds no slot, and its reservation only until its read
//     deadline, which is short. When every slot is busy, a freed one goes to the waiting
//     namespace with the fewest requests in flight (Acquire): a namespace that floods
//     podpatch waits behind itself, not in front of the others.
//
// A nil *Slots bounds nothing.
type Slots struct {
	handle   handling
	ordinary *semaphore.Weighted
	large    *semaphore.Weighted
}

// Options size Slots.
type Options struct {
	// MaxInFlight is the number of requests handled at once (reading excluded); at least 1.
	MaxInFlight int
	// LargeBytes bounds the bodies over OrdinaryBody read or handled at once; raised to
	// MaxObjectSize, so that the largest review can be served. Zero: DefaultLargeBytes.
	LargeBytes int64
	// OrdinaryBytes bounds the bodies up to OrdinaryBody read or handled at once. Zero:
	// DefaultOrdinaryBytes.
	OrdinaryBytes int64
}

const (
	// OrdinaryBody is the largest body of an ordinary review: the Pods and Services the
	// managers create are a few kilobytes (a Spark driver with its configuration in env,
	// some 10 KiB).
	OrdinaryBody = 64 << 10
	// DefaultOrdinaryBytes holds 128 ordinary bodies of the largest kind, or a thousand of the
	// usual few kilobytes, at once: clients that send slowly cannot fill it before their read
	// deadline cuts them off.
	DefaultOrdinaryBytes = 8 << 20
	// DefaultLargeBytes lets two of the largest reviews be read and handled at once.
	DefaultLargeBytes = 2 * MaxObjectSize
	// ReservationOverhead is added to every reservation: the request's own buffers, whatever
	// its body.
	ReservationOverhead = 4 << 10
)

// New returns the slots of o.
func New(o Options) *Slots {
	if o.LargeBytes == 0 {
		o.LargeBytes = DefaultLargeBytes
	}
	if o.OrdinaryBytes == 0 {
		o.OrdinaryBytes = DefaultOrdinaryBytes
	}
	return &Slots{
		handle:   handling{holders: make([]holder, max(o.MaxInFlight, 1))},
		ordinary: semaphore.NewWeighted(max(o.OrdinaryBytes, OrdinaryBody+ReservationOverhead)),
		large:    semaphore.NewWeighted(max(o.LargeBytes, MaxObjectSize+ReservationOverhead)),
	}
}

// Reservation is room reserved for one body.
type Reservation struct {
	// Pool is "ordinary" or "large": the pool label of podpatch_request_body_bytes_reserved.
	Pool  string
	Bytes int64
}

// Reserve reserves room for a body of n bytes (negative: not announced, so the largest; more
// than MaxObjectSize: an update's, reserved as the largest), waiting until ctx is done; release
// gives it back. A free reservation is taken even when ctx is done already, so that
// "overloaded" means exactly that there was no room.
func (s *Slots) Reserve(ctx context.Context, n int64) (release func(), r Reservation, err error) {
	if n < 0 || n > MaxObjectSize {
		n = MaxObjectSize
	}
	r = Reservation{Pool: "ordinary", Bytes: n + ReservationOverhead}
	if n > OrdinaryBody {
		r.Pool = "large"
	}
	if s == nil {
		return func() {}, r, nil
	}
	pool := s.ordinary
	if r.Pool == "large" {
		pool = s.large
	}
	if !pool.TryAcquire(r.Bytes) {
		if err := pool.Acquire(ctx, r.Bytes); err != nil {
			return nil, r, err
		}
	}
	return func() { pool.Release(r.Bytes) }, r, nil
}
