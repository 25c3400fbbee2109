package slots

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSlotsOrdinaryRoom: however the large bodies fill their room (generated sizes, announced
// or not), an ordinary body's reservation is taken at once; a large one waits for room and
// gets it when some is released. The room for large bodies always holds the largest one.
func TestSlotsOrdinaryRoom(t *testing.T) {
	rng := rand.New(rand.NewPCG(64, 8))
	for range 50 {
		large := rng.Int64N(4 * MaxReviewSize)
		s := New(Options{MaxInFlight: 1 + rng.IntN(8), LargeBytes: large})
		var releases []func()
		for {
			n := OrdinaryBody + 1 + rng.Int64N(MaxReviewSize)
			if rng.IntN(5) == 0 {
				n = -1 // not announced: the largest
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			release, _, err := s.Reserve(ctx, n)
			cancel()
			if err != nil {
				break // the large room is full
			}
			releases = append(releases, release)
		}
		require.NotEmpty(t, releases, "room for large bodies %d holds the largest", large)
		for range 100 {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // no waiting at all: only free room is taken
			release, _, err := s.Reserve(ctx, 1+rng.Int64N(OrdinaryBody))
			require.NoError(t, err, "an ordinary body finds room while the large room is full")
			release()
		}
		waited := make(chan error, 1)
		go func() {
			release, _, err := s.Reserve(context.Background(), MaxReviewSize)
			if err == nil {
				release()
			}
			waited <- err
		}()
		for _, release := range releases {
			release()
		}
		require.NoError(t, <-waited, "a large body waiting gets room once it is released")
	}
	prev := int64(0)
	for limit := int64(64 << 20); limit <= 4<<30; limit += 64 << 20 {
		got := LargeBytesFor(limit)
		require.GreaterOrEqual(t, got, int64(MaxObjectSize+ReservationOverhead), "limit %d: room for the largest reservation", limit)
		require.GreaterOrEqual(t, got, prev, "limit %d: more memory, more room", limit)
		prev = got
	}
	require.Equal(t, int64(DefaultLargeBytes), LargeBytesFor(0))
	etcdMax := int64(3<<20 + ReservationOverhead)
	require.Less(t, LargeBytesFor(256<<20), 2*etcdMax, "the manifests' 256 Mi: one review of etcd's largest at a time")
	require.GreaterOrEqual(t, LargeBytesFor(512<<20), 2*etcdMax, "512 Mi: more")
}

// TestReserveUpdateBodies: a body larger than one object (an update's two objects, up to
// MaxReviewSize) reserves as the largest object does, so that the room that holds one review of
// the largest creation also holds the largest update (reference §5).
func TestReserveUpdateBodies(t *testing.T) {
	s := New(Options{MaxInFlight: 1, LargeBytes: 1}) // raised to the largest reservation
	for _, n := range []int64{MaxObjectSize, MaxObjectSize + 1, MaxReviewSize, -1} {
		release, r, err := s.Reserve(context.Background(), n)
		require.NoError(t, err, "body of %d bytes", n)
		require.Equal(t, Reservation{Pool: "large", Bytes: MaxObjectSize + ReservationOverhead}, r, "body of %d bytes", n)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err = s.Reserve(ctx, OrdinaryBody+1)
		require.Error(t, err, "body of %d bytes: the room holds one at a time", n)
		release()
	}
}
