// Package report holds what the reports of podpatch's tools share (`podpatch audit`, `diff`,
// `explain`, `test`): the bound of a string taken from an object or a policy and of a table's
// line, the clipping that keeps a string within its bound and says how much it cut (Event
// messages are clipped with it too, internal/kube), the escaping of what a terminal would
// interpret, and the data formats every report is written in besides its own table (-o json,
// -o yaml). What one report bounds on its own stays in its package: the audit's lists and
// OpenReports (audit), `diff`'s groups, values and Markdown (preview), `explain`'s objects.
//
// text.go bounds and escapes strings; data.go writes the data formats.
package report

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxString bounds every string a report takes from an object or a policy: names, owners,
	// field paths, provenance entries, policy references, messages. It is above the longest such
	// string the API server validates (an apiVersion of 317 bytes, a provenance entry of about
	// 400), so only what it does not validate is ever clipped. A longer one keeps its head and
	// ends with an ellipsis that says how much was cut ("…(+512000 bytes)").
	MaxString = 512
	// MaxTableLine bounds a line of a report's table that holds such strings (the fields and
	// provenance under each object of `podpatch audit`, each line of `podpatch explain`).
	MaxTableLine = 2048
)

// ellipsis marks a clipped string.
const ellipsis = "…"

// Clip returns s if it has at most n bytes, else its head, cut at a character boundary, and
// an ellipsis saying how many bytes were left out ("…(+512000 bytes)"), n bytes at most in all
// (n ≥ 32).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// The marker's digits are at most those of len(s): the head never makes it longer.
	marker := len(ellipsis+"(+ bytes)") + len(strconv.Itoa(len(s)))
	k := max(n-marker, 0)
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return strings.ToValidUTF8(s[:k], "") + ellipsis + "(+" + strconv.Itoa(len(s)-k) + " bytes)"
}

// Printable escapes what a terminal or a table would interpret: control characters (escape
// sequences, tabs, newlines) and other non-graphic runes are written as Go escapes.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if !unicode.IsGraphic(r) || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsGraphic(r) && r != utf8.RuneError {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// Text is a string from an object or a policy as a report prints it: printable, at most
// MaxString bytes.
func Text(s string) string { return Clip(Printable(s), MaxString) }
