// Package jsontree is podpatch's small JSON kernel: a lazily decoded tree of an object's raw
// JSON, the encoder and the JSONPatch diff that go with it.
//
// Admission patches objects that are mostly left untouched: decoding a whole Pod into generic
// maps and encoding it back was most of the cost of an admission (docs/benchmarks/benchmarks.md, "Stages
// of the request path"). So, like Istio's injector ("a small fork … avoids expensive
// conversion"), podpatch keeps its own: Decode expands an object or list one level at a time,
// when it is first looked into, and leaves its members raw (json.RawMessage sub-slices of the
// input) until then; Diff walks only what was decoded; Encode copies raw members as they are.
//
// The invariant the merge code must keep: read the object only through Tree's accessors (Get,
// GetMap, At, Index), which decode what they return, and never insert raw JSON into it. A
// plain type assertion on a member not yet decoded sees a json.RawMessage, not a map, and would
// silently skip it. Values written into the tree are generic JSON (map[string]any, []any,
// string, json.Number, bool, nil). Output is deterministic: object members are written, and
// JSONPatch operations emitted, in sorted key order.
package jsontree

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Key is the identity of a list item, for lists merged item by item (Tree.Index).
type Key interface {
	// Of returns the key of a decoded item.
	Of(item map[string]any) string
	// OfRaw returns the key of an item still raw, without decoding it; false when it is not an
	// object.
	OfRaw(raw json.RawMessage) (string, bool)
}

// Encode encodes a generic tree (see AppendJSON).
func Encode(v any) ([]byte, error) { return AppendJSON(make([]byte, 0, 1024), v) }

// Canonical is a stable text form of a value (object members sorted), for equality.
func Canonical(v any) string {
	b, err := Encode(v)
	if err != nil { // generic JSON trees always encode
		return ""
	}
	return string(b)
}

// ErrTooDeep is returned by CheckDepth.
var ErrTooDeep = errors.New("nested too deeply")

// CheckDepth refuses JSON nested deeper than max, scanning without decoding.
func CheckDepth(js []byte, max int) error {
	depth := 0
	for i := 0; i < len(js); i++ {
		switch js[i] {
		case '"':
			i = skipString(js, i) - 1
		case '{', '[':
			if depth++; depth > max {
				return fmt.Errorf("%w: deeper than %d levels", ErrTooDeep, max)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// CountNodes counts the nodes of valid JSON as the YAML front end counts those of the same
// text (JSON is YAML): every value and every object key is one, whatever its size. It scans
// without decoding and stops once the count exceeds max, returning the offset where it did
// (decoding into generic maps costs hundreds of bytes per node; a scan costs nothing).
func CountNodes(js []byte, max int) (count, at int) {
	for i := 0; i < len(js); i++ {
		switch c := js[i]; c {
		case ' ', '\t', '\r', '\n', ',', ':', ']', '}':
			continue
		case '"':
			i = skipString(js, i) - 1
		case '{', '[':
		default: // a number, true, false or null
			for i+1 < len(js) && !isDelimiter(js[i+1]) {
				i++
			}
		}
		if count++; count > max {
			return count, i
		}
	}
	return count, len(js)
}

func isDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return false
}
