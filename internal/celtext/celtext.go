// Package celtext writes the CEL that the generated admission objects share: the second line's
// ValidatingAdmissionPolicies (vap) and native admission's MutatingAdmissionPolicies
// (native) state a policy's globs and label selectors the same way. Pure text.
package celtext

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// GlobRegexp turns path.Match globs into one anchored RE2 expression; false when a glob uses
// what the translation does not cover (character classes, escapes).
func GlobRegexp(globs []string) (string, bool) {
	alts := make([]string, 0, len(globs))
	for _, g := range globs {
		if strings.ContainsAny(g, `[]\`) {
			return "", false
		}
		var b strings.Builder
		for _, r := range g {
			switch r {
			case '*':
				b.WriteString(`[^/]*`)
			case '?':
				b.WriteString(`[^/]`)
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		alts = append(alts, b.String())
	}
	return "^(?:" + strings.Join(alts, "|") + ")$", true
}

// LabelTests state the tests of a label selector on one label map, in the caller's CEL.
type LabelTests struct {
	// In is `the map has key k with a value in vals` (vals sorted, not empty).
	In func(k string, vals []string) string
	// Has and Lacks are `the map has key k` and its negation.
	Has, Lacks func(k string) string
}

// Selector states sel as one condition per requirement, to be joined with &&: none when sel
// selects everything, "false" alone when it selects nothing.
func Selector(sel labels.Selector, m LabelTests) ([]string, error) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return []string{"false"}, nil
	}
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		vals := r.Values().UnsortedList() // a set
		slices.Sort(vals)
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			parts = append(parts, m.In(r.Key(), vals))
		case selection.NotIn, selection.NotEquals:
			parts = append(parts, "!"+m.In(r.Key(), vals))
		case selection.Exists:
			parts = append(parts, m.Has(r.Key()))
		case selection.DoesNotExist:
			parts = append(parts, m.Lacks(r.Key()))
		default:
			return nil, fmt.Errorf("operator %s", r.Operator())
		}
	}
	return parts, nil
}

// Quote quotes a string as a CEL string literal: every string a policy holds reaches CEL so,
// never as syntax (CEL's string escapes are Go's).
func Quote(s string) string { return strconv.Quote(s) }

// Quotes quotes a list of strings as a CEL list literal.
func Quotes(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
