package policies

import (
	"bytes"
	"slices"
	"sync/atomic"
	"weak"

	"github.com/podpatch/podpatch/policies/internal/jsontree"
)

// patchPart is the compiled form of one part of a policy (its template, or its service): the
// part's JSON, compact and canonical (jsontree.Encode), and its tree decoded on demand.
//
// A set of thousands of policies of which an object matches a handful held every part as a
// decoded tree (maps of maps: some 3 KB for a policy of ten lines, 70 % of the heap of a
// 10,000-ConfigMap store; docs/benchmarks/benchmarks.md, "Memory of a compiled policy set").
// The JSON is about a tenth of that. The tree is kept through a weak pointer, until the next
// garbage collection after it was decoded: the policies objects match are decoded again about
// once per collection cycle (every few hundred admissions; microseconds each, a fraction of an
// allocation per admission on average), and those no object matches hold only their JSON.
type patchPart struct {
	raw  []byte
	tree atomic.Pointer[weak.Pointer[map[string]any]]
}

// newPatchPart compiles a part; nil for none (a nil or absent map, as before). It decodes the
// JSON once, so that every later decode is known to succeed and yields the same tree.
func newPatchPart(m map[string]any) (*patchPart, error) {
	if m == nil {
		return nil, nil
	}
	raw, err := jsontree.Encode(m)
	if err != nil {
		return nil, err
	}
	if m, err = decodeObject(raw); err != nil {
		return nil, err
	}
	pp := &patchPart{raw: slices.Clip(bytes.Clone(raw))} // the encoder's buffer has room to spare
	pp.keep(&m)
	return pp, nil
}

// get returns the part's tree, shared and read-only: nil for a nil part.
func (pp *patchPart) get() map[string]any {
	if pp == nil {
		return nil
	}
	if w := pp.tree.Load(); w != nil {
		if m := w.Value(); m != nil {
			return *m
		}
	}
	m, err := decodeObject(pp.raw)
	if err != nil {
		return nil // unreachable: newPatchPart decoded these bytes
	}
	pp.keep(&m)
	return m
}

// keep makes m the part's tree until no one holds m's cell.
func (pp *patchPart) keep(m *map[string]any) {
	w := weak.Make(m)
	pp.tree.Store(&w)
}
