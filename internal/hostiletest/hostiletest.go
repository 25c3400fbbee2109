// Package hostiletest generates the hostile inputs the tests of every front end share: the
// YAML a tenant could write to take a parser down. Tests only; the product never imports it.
package hostiletest

import (
	"fmt"
	"runtime"
	"strings"
)

// FlowMappingAliasBomb is an alias bomb that passed a byte heuristic once: anchors and aliases
// right after `:` in a flow mapping, expanding to fanout^levels copies of a strlen-byte string,
// padded with pad plain members ahead of them so that go-yaml's own alias ratio check would not
// stop it. Its keys are JSON-style ("k0":*l0) or, with plainKeys, plain (k0: *l0).
func FlowMappingAliasBomb(levels, fanout, strlen, pad int, plainKeys bool) string {
	parts := make([]string, 0, pad+levels+1)
	for i := range pad {
		parts = append(parts, fmt.Sprintf(`"p%d":1`, i))
	}
	parts = append(parts, fmt.Sprintf(`"s0":&s0 %q`, strings.Repeat("x", strlen)))
	prev := "s0"
	for l := 1; l <= levels; l++ {
		items := make([]string, fanout)
		for i := range items {
			if plainKeys {
				items[i] = fmt.Sprintf("k%d: *%s", i, prev)
			} else {
				items[i] = fmt.Sprintf(`"k%d":*%s`, i, prev)
			}
		}
		parts = append(parts, fmt.Sprintf(`"l%d":&l%d {%s}`, l, l, strings.Join(items, ",")))
		prev = fmt.Sprintf("l%d", l)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// PolicyDocument is a PodTemplatePatch named name whose template's annotations are the YAML
// text annotations (a flow collection, or anything a tenant writes there).
func PolicyDocument(name, annotations string) string {
	return "apiVersion: podpatch.io/v1alpha1\nkind: PodTemplatePatch\nmetadata: {name: " + name +
		"}\nspec:\n  template:\n    metadata:\n      annotations: " + annotations + "\n"
}

// Allocated is the bytes f allocates: what the tests bound a hostile input's cost by. The count
// is process-wide, so the tests that call it do not run in parallel.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
