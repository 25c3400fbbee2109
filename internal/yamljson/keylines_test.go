package yamljson

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestKeyLines(t *testing.T) {
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a.yaml: |\n    k: v\n  b.yaml: 'k: v'\n  c.yaml: >-\n    k\n"
	require.Equal(t, map[string]KeyLine{"a.yaml": {Line: 6, Block: true}, "b.yaml": {Line: 8}, "c.yaml": {Line: 9, Block: true}},
		KeyLines([]byte(doc), "data"))
	require.Nil(t, KeyLines([]byte(doc), "nodata"))
	require.Nil(t, KeyLines([]byte("a: [1"), "data"))
	require.Nil(t, KeyLines([]byte("data: [1, 2]"), "data"))
}
