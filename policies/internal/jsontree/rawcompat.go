package jsontree

// The byte helpers below are unexported (firstByte, eachMember, unquote); these exported
// wrappers remain only for policies/validity_rules.go (sources, portOf, stringMembers), which
// another change owns. Members is their tree-level replacement; delete this file once that
// file uses it.

// FirstByte is the first byte of JSON text after white space, 0 if none.
// Only for validity_rules.go: read raw members with Members.
func FirstByte(r []byte) byte { return firstByte(r) }

// EachMember calls f with the name and raw value of every member of a raw JSON object.
// Only for validity_rules.go: read raw members with Members.
func EachMember(raw []byte, f func(name, value []byte)) { eachMember(raw, f) }

// Unquote decodes a JSON string.
// Only for validity_rules.go: Members decodes the strings it returns.
func Unquote(r []byte) string { return unquote(r) }
