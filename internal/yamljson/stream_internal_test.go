package yamljson

import (
	"context"
	"errors"
	"io"
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

// TestStreamSplitsDocuments: documents come back in order, empty ones included and told blank,
// the stream's first `---` line dropped from Text only; a stream that opens a flow collection
// is handed whole to JSON, and its documents are still read after.
func TestStreamSplitsDocuments(t *testing.T) {
	read := func(s *Stream) []Document {
		var docs []Document
		for {
			d, err := s.Next()
			if errors.Is(err, io.EOF) {
				return docs
			}
			require.NoError(t, err)
			docs = append(docs, d)
		}
	}
	s := NewStream(strings.NewReader("---\na: 1\n---\n# c\n---\nb: 2\n"))
	_, ok, err := s.JSON()
	require.NoError(t, err)
	require.False(t, ok)
	docs := read(s)
	require.Len(t, docs, 3)
	require.Equal(t, "---\na: 1\n", string(docs[0].Raw))
	require.Equal(t, "a: 1\n", string(docs[0].Text))
	require.Equal(t, []bool{false, true, false}, []bool{docs[0].Blank, docs[1].Blank, docs[2].Blank})
	require.Equal(t, "b: 2\n", string(docs[2].Text))

	s = NewStream(strings.NewReader("  \n{a: 1}\n---\n[b]\n"))
	text, ok, err := s.JSON()
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "  \n{a: 1}\n---\n[b]\n", string(text))
	docs = read(s)
	require.Len(t, docs, 2)
	require.Equal(t, "[b]\n", string(docs[1].Text))
}
