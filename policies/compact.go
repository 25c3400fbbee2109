package policies

import (
	"bytes"
	"slices"
	"sync/atomic"
	"weak"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// The compile stage (doc.go): a policy's patches kept as compact JSON, decoded on demand.

// patchPart is the compiled form of one part of a policy (its template, or its service): the
// part's JSON, compact and canonical (jsontree.Encode), and its tree decoded on demand.
//
// A set of thousands of policies of which an object matches a handful held every part as a
// decoded tree (maps of maps: some 3 KB for a policy of ten lines, 70 % of the heap of a
// 10,000-ConfigMap store; docs/benchmarks/benchmarks.md, "Memory of a compiled policy set").
// The JSON is about a tenth of that. The tree is kept through a weak pointer: while an admission
// holds it (the policies it selected), and otherwise until the next garbage collection, so the
// policies objects match are decoded again about once per collection cycle (every few hundred
// admissions; microseconds each, a fraction of an allocation per admission on average), and
// those no object matches hold only their JSON.
type patchPart struct {
	raw  []byte
	tree atomic.Pointer[weak.Pointer[treeCell]]
}

// treeCell holds a part's decoded tree. The weak pointer is to the cell, so whoever holds the
// cell (pin) keeps the tree: an admission pins the trees of the policies it selected
// (layers.pins), so that the collections its own allocations cause (a large object: several)
// do not make it decode them again.
type treeCell struct{ m map[string]any }

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
	if m, err = jsontree.DecodeObject(raw); err != nil {
		return nil, err
	}
	pp := &patchPart{raw: slices.Clip(bytes.Clone(raw))} // the encoder's buffer has room to spare
	pp.keep(&treeCell{m})
	return pp, nil
}

// get returns the part's tree, shared and read-only: nil for a nil part.
func (pp *patchPart) get() map[string]any {
	if c := pp.pin(); c != nil {
		return c.m
	}
	return nil
}

// pin returns the cell of the part's tree, decoding it if the collector dropped it; nil for a
// nil part. The tree stays while the cell is held.
func (pp *patchPart) pin() *treeCell {
	if pp == nil {
		return nil
	}
	if w := pp.tree.Load(); w != nil {
		if c := w.Value(); c != nil {
			return c
		}
	}
	m, err := jsontree.DecodeObject(pp.raw)
	if err != nil {
		return nil // unreachable: newPatchPart decoded these bytes
	}
	c := &treeCell{m}
	pp.keep(c)
	return c
}

// keep makes c the part's tree cell until no one holds it.
func (pp *patchPart) keep(c *treeCell) {
	w := weak.Make(c)
	pp.tree.Store(&w)
}
