package native

import (
	"slices"
	"strings"

	"github.com/podpatch/podpatch/internal/celtext"
)

// The CEL text every stage writes. Every string a policy holds reaches CEL as a quoted literal
// (strconv.Quote: CEL's string escapes are Go's), never as syntax; field names are the
// schema's, written by this package, never a policy's.

// labelsOf is the CEL of a string map in the object (object.metadata.labels), with its guard.
type labelsOf string

func (m labelsOf) present() string { return "has(" + string(m) + ")" }

// has is `the map has key k`.
func (m labelsOf) has(k string) string {
	return "(" + m.present() + " && " + celtext.Quote(k) + " in " + string(m) + ")"
}

// in is `the map has key k with a value in vals`.
func (m labelsOf) in(k string, vals []string) string {
	test := string(m) + "[" + celtext.Quote(k) + "] == " + celtext.Quote(vals[0])
	if len(vals) > 1 {
		test = string(m) + "[" + celtext.Quote(k) + "] in " + celtext.Quotes(vals)
	}
	return "(" + m.has(k) + " && " + test + ")"
}

// value is the map's value at k, or "" when the map or the key is not set.
func (m labelsOf) value(k string) string {
	return "(" + m.has(k) + " ? " + string(m) + "[" + celtext.Quote(k) + `] : "")`
}

// pointer escapes a map key as a JSON pointer segment (RFC 6901).
func pointer(k string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(k) }

// globMatch is policies' anyGlob: a name, non-empty and at most 63 bytes, matching one of
// globs; false when a glob uses what the translation to a regular expression does not cover.
// Names without wildcards are a list the name is in, which the API server tests for less than
// a regular expression; the names that could never match (empty, longer than 63) left out.
func globMatch(name string, globs []string) (string, bool) {
	if literal(globs) {
		var names []string
		for _, g := range globs {
			if g != "" && len(g) <= 63 && !slices.Contains(names, g) {
				names = append(names, g)
			}
		}
		if len(names) == 0 {
			return "false", true
		}
		return "(" + name + " in " + celtext.Quotes(names) + ")", true
	}
	re, ok := celtext.GlobRegexp(globs)
	if !ok {
		return "", false
	}
	return "(" + name + ` != "" && size(` + name + ") <= 63 && " + name + ".matches(" + celtext.Quote(re) + "))", true
}

// or and and join conditions; an empty list is false and true.
func or(cs []string) string {
	if len(cs) == 0 {
		return "false"
	}
	return "(" + strings.Join(cs, " || ") + ")"
}

func and(cs []string) string {
	if len(cs) == 0 {
		return "true"
	}
	return "(" + strings.Join(cs, " && ") + ")"
}

// String is the map's CEL.
func (m labelsOf) String() string { return string(m) }

// literal says whether a match list names exactly what it matches: not empty (empty matches
// all), and no glob with a wildcard, a character class or an escape.
func literal(globs []string) bool {
	return len(globs) > 0 && !slices.ContainsFunc(globs, func(g string) bool { return strings.ContainsAny(g, `*?[\`) })
}
