package jsontree

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzAppendJSONString checks the hand-written string encoder against encoding/json.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te\back`, "tab\tnew\nline\r", "\x00\x1f", "héllo ✓", "\xff\xfe bad", "\u2028\u2029", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		require.Equal(t, string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))), string(AppendString(nil, s)))
	})
}

// TestAppendJSON encodes a tree as encoding/json does (sorted keys, no HTML escaping).
func TestAppendJSON(t *testing.T) {
	tree := map[string]any{
		"b": []any{json.Number("1.50"), true, false, nil, "x<y"},
		"a": map[string]any{"z": map[string]any{}, "y": []any{}},
		"c": json.RawMessage(`{"kept":"as is"}`),
	}
	got, err := Encode(tree)
	require.NoError(t, err)
	require.Equal(t, `{"a":{"y":[],"z":{}},"b":[1.50,true,false,null,"x<y"],"c":{"kept":"as is"}}`, string(got))
}
