package vap

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/podpatch/podpatch/internal/celtext"
)

// The CEL text every stage writes: literals, field access guarded by has(), map entries and
// shell globs as regular expressions. Every string a policy holds reaches CEL as a quoted
// literal (strconv.Quote: CEL's string escapes are Go's), never as syntax.

// identifier is a field name CEL can select with a dot: the Kubernetes schemas' field names.
var identifier = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// celReserved are CEL's reserved words, which the API server's CEL escapes as __word__; a
// field of that name is left to the not-checked list rather than escaped here.
var celReserved = []string{"true", "false", "null", "in", "as", "break", "const", "continue", "else",
	"for", "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}

// fieldName reports whether a schema field can be selected as .name.
func fieldName(name string) bool {
	return identifier.MatchString(name) && !slices.Contains(celReserved, name) && !strings.HasPrefix(name, "__")
}

// present is the guard that every field of path is set under root: has(root.a) && has(root.a.b) …
func present(root string, path []string) string {
	var parts []string
	cur := root
	for _, f := range path {
		cur += "." + f
		parts = append(parts, "has("+cur+")")
	}
	return strings.Join(parts, " && ")
}

// absent is the negation of present: some field of path is not set.
func absent(root string, path []string) string { return "!(" + present(root, path) + ")" }

// access is root.a.b.c.
func access(root string, path []string) string {
	if len(path) == 0 {
		return root
	}
	return root + "." + strings.Join(path, ".")
}

// entryIn is `the map at root.path has key k with a value in vals`.
func entryIn(root string, path []string, k string, vals []string) string {
	m := access(root, path)
	test := m + "[" + celtext.Quote(k) + "] == " + celtext.Quote(vals[0])
	if len(vals) > 1 {
		test = m + "[" + celtext.Quote(k) + "] in " + celtext.Quotes(vals)
	}
	return "(" + present(root, path) + " && " + celtext.Quote(k) + " in " + m + " && " + test + ")"
}

// entryPresent is `the map at root.path has key k`.
func entryPresent(root string, path []string, k string) string {
	return "(" + present(root, path) + " && " + celtext.Quote(k) + " in " + access(root, path) + ")"
}

// entryAbsent is `the map at root.path lacks key k` (or is not set).
func entryAbsent(root string, path []string, k string) string {
	return "(" + absent(root, path) + " || !(" + celtext.Quote(k) + " in " + access(root, path) + "))"
}

// entryValue is the map's value at k, or "" when root.path or the key is not set.
func entryValue(root string, path []string, k string) string {
	return "(" + entryPresent(root, path, k) + " ? " + access(root, path) + "[" + celtext.Quote(k) + "] : \"\")"
}

// globTest is `name matches one of the path.Match globs` without a regular expression where a
// glob needs none: the API server compiles a regular expression on every evaluation, tens of
// microseconds, and a create runs the selection of every policy of its group. A glob without
// wildcards is an equality, one `*` a prefix and a suffix (the names globs match hold no "/",
// which `*` does not match); the others one anchored expression. false as for celtext.GlobRegexp.
func globTest(name string, globs []string) (string, bool) {
	var exact, tests, rest []string
	for _, g := range globs {
		if strings.ContainsAny(g, `[]\`) {
			return "", false
		}
		switch strings.Count(g, "*") + strings.Count(g, "?") {
		case 0:
			exact = append(exact, g)
			continue
		case 1:
			if before, after, ok := strings.Cut(g, "*"); ok {
				var t []string
				if before != "" {
					t = append(t, name+".startsWith("+celtext.Quote(before)+")")
				}
				if after != "" {
					t = append(t, name+".endsWith("+celtext.Quote(after)+")")
				}
				if before != "" && after != "" {
					t = append(t, "size("+name+") >= "+strconv.Itoa(utf8.RuneCountInString(before+after)))
				}
				if len(t) == 0 {
					t = []string{"true"}
				}
				tests = append(tests, "("+strings.Join(t, " && ")+")")
				continue
			}
		}
		rest = append(rest, g)
	}
	switch len(exact) {
	case 0:
	case 1:
		tests = append([]string{name + " == " + celtext.Quote(exact[0])}, tests...)
	default:
		tests = append([]string{name + " in " + celtext.Quotes(exact)}, tests...)
	}
	if len(rest) > 0 {
		re, ok := celtext.GlobRegexp(rest)
		if !ok {
			return "", false
		}
		tests = append(tests, name+".matches("+celtext.Quote(re)+")")
	}
	return "(" + strings.Join(tests, " || ") + ")", true
}
