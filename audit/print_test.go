package audit

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestProgress: nothing for the first second, then at most a line a second; on a terminal the
// line is rewritten in place and cleared at the end.
func TestProgress(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		var out bytes.Buffer
		now := time.Unix(0, 0)
		p := &Progress{W: &out, Terminal: terminal, After: time.Second, Now: func() time.Time { return now }}
		p.Begin()
		step := func(d time.Duration, pods int) {
			now = now.Add(d)
			p.Update(Stats{Pods: pods})
		}
		step(500*time.Millisecond, 100)
		require.Empty(t, out.String(), "a quick audit prints nothing")
		step(600*time.Millisecond, 200)
		step(300*time.Millisecond, 300)
		step(800*time.Millisecond, 400)
		p.Done()
		lines := strings.Count(out.String(), "podpatch audit: ")
		require.Equal(t, 2, lines, "%q", out.String())
		require.Contains(t, out.String(), "podpatch audit: 200 pod(s) and 0 service(s) read")
		require.Contains(t, out.String(), "podpatch audit: 400 pod(s)")
		if terminal {
			require.True(t, strings.HasSuffix(out.String(), "\r\033[K"), "%q", out.String())
			require.NotContains(t, out.String(), "\n")
		} else {
			require.Equal(t, 2, strings.Count(out.String(), "\n"))
		}
	}
}
