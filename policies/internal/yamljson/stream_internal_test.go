package yamljson

import (
	"context"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBlankAgreesWithTheParser: what blank skips, the parser reads as no value, for documents
// made of every kind of line.
func TestBlankAgreesWithTheParser(t *testing.T) {
	lim := Limits{Text: 1 << 20, Depth: 64, Nodes: 1 << 20, JSON: 1 << 20}
	lines := []string{"", "# c", "  # c", "\t# c", "---", "--- # c", "---\t", " ---", "----", "---x", "~", "a: 1", "...", "  ", "#", "\r"}
	r := rand.New(rand.NewSource(3))
	skipped := 0
	for range 20000 {
		var b strings.Builder
		for range 1 + r.Intn(4) {
			b.WriteString(lines[r.Intn(len(lines))] + "\n")
		}
		text := []byte(b.String())
		if !blank(text) {
			continue
		}
		skipped++
		// Never a value: null, or an error (a tab before a comment, several empty documents).
		if js, err := ToJSON(context.Background(), text, lim); err == nil {
			require.Equal(t, "null", string(js), "%q", text)
		}
	}
	require.Greater(t, skipped, 1000)
}
