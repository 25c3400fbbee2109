package yamljson_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/internal/yamljson"
	"github.com/podpatch/podpatch/policies"
)

var testLimits = yamljson.Limits{Text: 1 << 20, Depth: 64, Nodes: 1 << 20, JSON: 1 << 20}

// maxBytesPerTextByte bounds the memory a conversion allocates per byte of text: go-yaml's
// tree costs up to ~250 (TestParserCostIsLinear); an expanded alias costs thousands.
const maxBytesPerTextByte = 1024

// checkBounded converts text and fails unless the work stayed proportional to its size.
func checkBounded(t *testing.T, text string) ([]byte, error) {
	t.Helper()
	var js []byte
	var err error
	n := hostiletest.Allocated(func() { js, err = yamljson.ToJSON(context.Background(), []byte(text), testLimits) })
	if limit := uint64(maxBytesPerTextByte*len(text) + 256<<10); n > limit {
		t.Fatalf("converting %d bytes allocated %d bytes (limit %d)", len(text), n, limit)
	}
	if err == nil {
		require.True(t, json.Valid(js), "invalid JSON %q", js)
		require.LessOrEqual(t, len(js), testLimits.JSON)
	}
	return js, err
}

// checkGenerated runs one generated stream through the front end, document by document as
// policies.SplitDocuments splits it: refused when it holds a hostile construct, else exactly
// the generated values.
func checkGenerated(t *testing.T, text string, want []any, hostile bool) {
	t.Helper()
	if _, err := checkBounded(t, text); err != nil && !errors.Is(err, yamljson.ErrRefused) &&
		!errors.Is(err, yamljson.ErrSeveralDocuments) && !strings.Contains(err.Error(), "unknown anchor") {
		t.Fatalf("unexpected error %v for\n%s", err, text)
	}
	docs, err := policies.SplitDocuments(strings.NewReader(text))
	if hostile {
		require.ErrorIs(t, err, yamljson.ErrRefused, "hostile YAML accepted:\n%s", text)
		return
	}
	require.NoError(t, err, "valid YAML refused:\n%s", text)
	require.Len(t, docs, len(want), "documents of\n%s", text)
	for i, d := range docs {
		var got any
		require.NoError(t, json.Unmarshal(d.JSON, &got))
		require.Equal(t, plain(want[i]), got, "document %d of\n%s", i+1, text)
	}
}

// FuzzFrontEnd checks the one YAML front end two ways: the fuzz bytes as YAML text (no panic,
// work proportional to the size, valid JSON within the limits), and the fuzz bytes as the
// choices of the hostile-YAML grammar (gen_test.go): a stream with an anchor, alias, merge key
// or custom tag anywhere is refused, any other converts to exactly the generated values.
// Run it long with: go test -run '^$' -fuzz FuzzFrontEnd -fuzztime 30m ./internal/yamljson
func FuzzFrontEnd(f *testing.F) {
	f.Add([]byte(hostiletest.FlowMappingAliasBomb(3, 5, 16, 8, false)))
	f.Add([]byte("a: &a [1]\nb: *a\n"))
	f.Add([]byte("{\"s0\":&s0 \"x\", \"l1\":&l1 {\"k0\":*s0}}"))
	f.Add([]byte("- !foo x\n- <<: {a: 1}\n---\n[*a]"))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		_, _ = checkBounded(t, string(data)) //nolint:errcheck // any error is fine; the work is what is checked
		text, docs, hostile := generate(data, hostileNone)
		checkGenerated(t, text, docs, hostile)
	})
}
