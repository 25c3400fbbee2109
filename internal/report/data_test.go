package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// WriteData writes indented JSON with a newline, the bytes of an indenting json.Encoder (which
// `podpatch test -o json` used), HTML characters escaped as both escape them; YAML; and names
// the command's formats for any other.
func TestWriteData(t *testing.T) {
	v := map[string]any{"name": "<a & b>", "n": 1, "list": []string{"x"}, "empty": map[string]any{}}
	var got, enc bytes.Buffer
	require.NoError(t, WriteData(&got, v, "json", nil))
	e := json.NewEncoder(&enc)
	e.SetIndent("", "  ")
	require.NoError(t, e.Encode(v))
	require.Equal(t, enc.String(), got.String())
	require.Equal(t, "{\n  \"empty\": {},\n  \"list\": [\n    \"x\"\n  ],\n  \"n\": 1,\n  \"name\": \"\\u003ca \\u0026 b\\u003e\"\n}\n", got.String())

	got.Reset()
	require.NoError(t, WriteData(&got, v, "yaml", nil))
	require.Equal(t, "empty: {}\nlist:\n- x\n\"n\": 1\nname: <a & b>\n", got.String())

	err := WriteData(&got, v, "xml", []string{"table", "json", "yaml"})
	require.EqualError(t, err, `unknown output format "xml" (want table, json, yaml)`)
}
