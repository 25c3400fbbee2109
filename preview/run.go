package preview

import (
	"runtime"
	"sync"

	"github.com/podpatch/podpatch/placement"
)

// batchSize is how many objects a Runner holds before previewing them: the memory of a page.
const batchSize = 512

// Runner previews a stream of objects on several goroutines, each with a Previewer of its own
// (previews are independent: one object's result never depends on another's), and gathers the
// results in input order, so that the report does not depend on the scheduling.
type Runner struct {
	// OnError is told about each object that could not be previewed.
	OnError func(error)

	c       *Collector
	workers []*Previewer
	batch   []Input
}

// NewRunner previews with workers goroutines (0: one per CPU); snap (nil: none) is the
// cluster's Nodes and NodePools, shared read-only.
func NewRunner(s Sets, snap *placement.Snapshot, workers int) *Runner {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	r := &Runner{c: NewCollector(s)}
	for range workers {
		p := &Previewer{Sets: s}
		if snap != nil {
			p.Placement = &placement.Cache{Snapshot: snap}
		}
		r.workers = append(r.workers, p)
	}
	return r
}

// Add previews an object (later, in a batch); its JSON is copied.
func (r *Runner) Add(in Input) {
	in.JSON = append([]byte(nil), in.JSON...)
	r.batch = append(r.batch, in)
	if len(r.batch) == batchSize {
		r.flush()
	}
}

// Report previews what is left and returns the report.
func (r *Runner) Report() *Report {
	r.flush()
	return r.c.Report()
}

type outcome struct {
	obj Object
	ok  bool
	err error
}

func (r *Runner) flush() {
	out := make([]outcome, len(r.batch))
	var wg sync.WaitGroup
	for w, p := range r.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(r.batch); i += len(r.workers) {
				o, ok, err := p.Object(r.batch[i])
				out[i] = outcome{o, ok, err}
			}
		}()
	}
	wg.Wait()
	for _, o := range out {
		r.c.Read()
		switch {
		case o.err != nil:
			r.c.Error()
			if r.OnError != nil {
				r.OnError(o.err)
			}
		case o.ok:
			r.c.Add(o.obj)
		}
	}
	r.batch = r.batch[:0]
}
