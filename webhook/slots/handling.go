package slots

import (
	"context"
	"sync"
)

// handling is the handling slots, shared fairly between namespaces (reference §5). A free slot
// is taken at once. When none is free, requests wait in one queue per namespace, and a slot
// given back goes straight to the head of the waiting namespace with the fewest requests in
// flight, holding a slot or waiting for one (ties: the one whose head has waited longest). A
// namespace that sends more than podpatch handles then waits behind its own requests: another
// namespace's request gets the next free slot, whatever the flood's length.
//
// The slots held are a small array (one holder per slot, --max-in-flight of them), so the free
// path allocates nothing and counting a namespace's slots is a scan of that array; handing a
// slot over scans the waiting namespaces (at most the requests waiting, which the room for
// bodies bounds) times that array. While requests wait there is no free slot: a slot given
// back is handed over, never freed.
type handling struct {
	mu      sync.Mutex
	holders []holder // one per slot
	held    int      // holders in use
	queues  []*queue // the namespaces with waiting requests, in no order
	arrived uint64   // waiters so far: their order of arrival
}

// holder is one handling slot: whether it is held, and by which namespace.
type holder struct {
	ns   string
	used bool
}

// queue is one namespace's waiting requests, oldest first (an intrusive list: a waiter whose
// context ends leaves from wherever it stands).
type queue struct {
	ns         string
	head, tail *waiter
	n          int // waiters
}

// waiter is one waiting request. ready is closed when it is given a slot; granted says so
// under the lock.
type waiter struct {
	q          *queue
	prev, next *waiter
	seq        uint64
	ready      chan struct{}
	granted    bool
}

// Acquire takes a handling slot for a request of namespace ns ("" for cluster-scoped objects),
// waiting until ctx is done. A free slot is taken even when ctx is done already. While every
// slot is busy, a slot given back goes to the waiting namespace with the fewest requests in
// flight (holding or waiting), then to the one that has waited longest, so one namespace's
// load cannot push another's requests past their budget (reference §5). Release(ns) gives it
// back.
func (s *Slots) Acquire(ctx context.Context, ns string) error {
	if s == nil {
		return nil
	}
	h := &s.handle
	h.mu.Lock()
	if h.held < len(h.holders) {
		h.take(ns)
		h.mu.Unlock()
		return nil
	}
	if ctx.Err() != nil {
		h.mu.Unlock()
		return ctx.Err()
	}
	w := h.wait(ns)
	h.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.granted { // handed a slot as ctx ended: it is taken
		return nil
	}
	h.unlink(w)
	return ctx.Err()
}

// Release returns a slot that Acquire took for namespace ns; it goes to a waiting request,
// if any (Acquire says which).
func (s *Slots) Release(ns string) {
	if s == nil {
		return
	}
	h := &s.handle
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.holders {
		if h.holders[i].used && h.holders[i].ns == ns {
			h.holders[i] = holder{}
			h.held--
			break
		}
	}
	if h.held < len(h.holders) && len(h.queues) > 0 {
		h.grant(h.next())
	}
}

// take gives a free slot to ns; h.mu held.
func (h *handling) take(ns string) {
	for i := range h.holders {
		if !h.holders[i].used {
			h.holders[i] = holder{ns: ns, used: true}
			h.held++
			return
		}
	}
}

// holding counts the slots ns holds; h.mu held.
func (h *handling) holding(ns string) int {
	n := 0
	for _, x := range h.holders {
		if x.used && x.ns == ns {
			n++
		}
	}
	return n
}

// next is the queue whose head gets the next slot: the namespace with the fewest requests in
// flight (holding a slot or waiting for one), then the oldest head; h.mu held, queues not
// empty.
func (h *handling) next() *queue {
	best, bestN := h.queues[0], h.holding(h.queues[0].ns)+h.queues[0].n
	for _, q := range h.queues[1:] {
		n := h.holding(q.ns) + q.n
		if n < bestN || (n == bestN && q.head.seq < best.head.seq) {
			best, bestN = q, n
		}
	}
	return best
}

// grant hands a free slot to the head of q; h.mu held.
func (h *handling) grant(q *queue) {
	w := q.head
	h.unlink(w)
	h.take(q.ns)
	w.granted = true
	close(w.ready)
}

// wait queues a waiter for ns; h.mu held.
func (h *handling) wait(ns string) *waiter {
	var q *queue
	for _, x := range h.queues {
		if x.ns == ns {
			q = x
			break
		}
	}
	if q == nil {
		q = &queue{ns: ns}
		h.queues = append(h.queues, q)
	}
	h.arrived++
	w := &waiter{q: q, prev: q.tail, seq: h.arrived, ready: make(chan struct{})}
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
	return w
}

// unlink takes w out of its queue, and the queue out of h.queues once empty; h.mu held.
func (h *handling) unlink(w *waiter) {
	q := w.q
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
	if q.head == nil {
		for i, x := range h.queues {
			if x == q {
				last := len(h.queues) - 1
				h.queues[i], h.queues[last] = h.queues[last], nil
				h.queues = h.queues[:last]
				break
			}
		}
	}
}

// Waiting returns the number of requests waiting for a handling slot.
func (s *Slots) Waiting() int {
	if s == nil {
		return 0
	}
	s.handle.mu.Lock()
	defer s.handle.mu.Unlock()
	n := 0
	for _, q := range s.handle.queues {
		n += q.n
	}
	return n
}
