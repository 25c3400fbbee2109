package jsontree

import (
	"bytes"
	"encoding/json"
)

// The raw members of a node not decoded yet, read without decoding the node: list indexes key
// the items of long lists this way (Key.OfRaw), so that indexing a large object costs a scan and
// not a decode. The byte scanning stays in this package.

// Kind is the JSON type of a member Members reads.
type Kind uint8

// The kinds of JSON values.
const (
	Null Kind = iota
	String
	Number
	Bool
	Object
	List
)

// Scalar is a member as Members reads it: its kind and, for scalars, its text (a string
// unquoted, a number as written, "true" or "false"; empty for null, objects and lists). A value
// rather than an interface, so that reading it allocates no more than its text.
type Scalar struct {
	Kind Kind
	Text string
}

// Members calls f(i, value) for every member of the raw object raw whose name is names[i] (for
// every such i), in the order of the members. Members not named are skipped without being
// decoded. It returns false, calling nothing, when raw is not an object.
func Members(raw json.RawMessage, names []string, f func(i int, value Scalar)) bool {
	if firstByte(raw) != '{' {
		return false
	}
	eachMember(raw, func(name, value []byte) {
		for i, n := range names {
			if string(name) == n {
				f(i, scalarOf(value))
			}
		}
	})
	return true
}

// AllMembers calls f(name, value) for every member of the raw object raw, in order, and
// returns false, calling nothing, when raw is not an object.
func AllMembers(raw json.RawMessage, f func(name string, value Scalar)) bool {
	if firstByte(raw) != '{' {
		return false
	}
	eachMember(raw, func(name, value []byte) { f(string(name), scalarOf(value)) })
	return true
}

// Member returns the raw value of the first member named name of the raw object raw, scanning
// no further than that member; false when raw is not an object or has no such member.
func Member(raw json.RawMessage, name string) (json.RawMessage, bool) {
	if firstByte(raw) != '{' {
		return nil, false
	}
	var out json.RawMessage
	found := false
	eachMemberWhile(raw, func(n, v []byte) bool {
		if string(n) == name {
			out, found = v, true
		}
		return !found
	})
	return out, found
}

// Items calls f with the raw value of every item of the raw list raw, in order, until f returns
// false; it returns false, calling nothing, when raw is not a list.
func Items(raw json.RawMessage, f func(item json.RawMessage) bool) bool {
	raw = bytes.TrimSpace(raw)
	if firstByte(raw) != '[' {
		return false
	}
	for i := skipSpace(raw, 1); i < len(raw) && raw[i] != ']'; {
		end := skipValue(raw, i)
		if end <= i || !f(raw[i:end]) {
			return true
		}
		if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return true
}

// scalarOf reads a raw member value (no leading space) as a Scalar.
func scalarOf(r []byte) Scalar {
	switch firstByte(r) {
	case '{':
		return Scalar{Kind: Object}
	case '[':
		return Scalar{Kind: List}
	case '"':
		return Scalar{Kind: String, Text: unquote(r)}
	case 't':
		return Scalar{Kind: Bool, Text: "true"}
	case 'f':
		return Scalar{Kind: Bool, Text: "false"}
	case 'n', 0:
		return Scalar{Kind: Null}
	default:
		return Scalar{Kind: Number, Text: string(r)}
	}
}

// CanonicalObject is Canonical of the raw object raw, computed without decoding it; false when
// raw is not an object.
func CanonicalObject(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '{' {
		return "", false
	}
	return string(appendCanonical(nil, raw)), true
}
