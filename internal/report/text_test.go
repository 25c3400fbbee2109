package report

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// Clip keeps a message whole when it fits and otherwise keeps a head cut at a character,
// ends with the marker saying how much was cut, and never exceeds the bound, for generated
// messages of every length around the bound and of one- to four-byte characters.
// (internal/kube's TestClipBoundsEveryMessage, with the Event message's bound, before Clip
// moved here.)
func TestClipBoundsEveryMessage(t *testing.T) {
	const bound = 1000 // kube.MaxEventMessage
	rng := rand.New(rand.NewPCG(1, 2))
	runes := []string{"a", "é", "€", "😀"}
	for range 2000 {
		var b strings.Builder
		n := bound - 50 + rng.IntN(200)
		for b.Len() < n {
			b.WriteString(runes[rng.IntN(len(runes))])
		}
		s := b.String()
		got := Clip(s, bound)
		require.LessOrEqual(t, len(got), bound)
		require.True(t, utf8.ValidString(got))
		if len(s) <= bound {
			require.Equal(t, s, got)
			continue
		}
		head, cut, ok := strings.Cut(got, ellipsis+"(+")
		require.True(t, ok, "a clipped message says so")
		require.True(t, strings.HasPrefix(s, head))
		require.Equal(t, strings.TrimSuffix(cut, " bytes)"), strconv.Itoa(len(s)-len(head)))
	}
}

// Printable leaves a printable string as it is and writes what a terminal interprets as Go
// escapes; Text also bounds it.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"dask worker é€😀":     "dask worker é€😀",
		"a\x1b[2Jb":           `a\x1b[2Jb`,
		"tab\there\nnewline":  `tab\there\nnewline`,
		"bad\xffutf8":         `bad\ufffdutf8`,
		"\u202eright-to-left": `\u202eright-to-left`,
	} {
		require.Equal(t, want, Printable(in), "%q", in)
	}
	long := Text(strings.Repeat("\x1b", MaxString))
	require.LessOrEqual(t, len(long), MaxString)
	require.True(t, strings.HasPrefix(long, `\x1b`))
}
