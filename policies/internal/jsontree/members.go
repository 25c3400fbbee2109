package jsontree

import "encoding/json"

// The raw members of a node not decoded yet, read without decoding the node: list indexes key
// the items of long lists this way (Key.OfRaw), so that indexing a large object costs a scan and
// not a decode. The byte scanning stays in this package.

// Members calls f(i, value) for every member of the raw object raw whose name is names[i] (for
// every such i), in the order of the members, with the value decoded as Expand decodes members:
// scalars decoded (string, json.Number, bool, nil), objects and lists still raw. Members not
// named are skipped without being decoded. It returns false, calling nothing, when raw is not
// an object.
func Members(raw json.RawMessage, names []string, f func(i int, value any)) bool {
	if firstByte(raw) != '{' {
		return false
	}
	eachMember(raw, func(name, value []byte) {
		for i, n := range names {
			if string(name) == n {
				f(i, scalarOrRaw(value))
			}
		}
	})
	return true
}

// CanonicalObject is Canonical of the raw object raw, computed without decoding it; false when
// raw is not an object.
func CanonicalObject(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '{' {
		return "", false
	}
	return string(appendCanonical(nil, raw)), true
}
