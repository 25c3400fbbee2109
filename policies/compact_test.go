package policies

import (
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// TestPatchPartRoundTrip checks the compact compiled form against every policy of the golden
// cases and the examples: the tree a part yields is the tree the parse made (the policy as
// written, nulls and numbers kept), whether it is the one kept since the compile or one decoded
// again after the garbage collector dropped it; a collection drops it, and between two
// collections it is decoded once.
func TestPatchPartRoundTrip(t *testing.T) {
	files, err := filepath.Glob("testdata/apply/*/policies.yaml")
	require.NoError(t, err)
	files = append(files, "../manifests/examples")
	cms, err := readConfigMaps(files...)
	require.NoError(t, err)
	parts := 0
	for _, cm := range cms {
		ps, probs := ParseConfigMap(cm, DefaultOptions())
		if len(probs) > 0 {
			continue // cases of refused policies
		}
		for _, p := range ps {
			// What the parse kept, decoded from the document itself.
			template, service := documentParts(t, cm.Data[p.Key], p.Index)
			for _, c := range []struct {
				part *patchPart
				want map[string]any
			}{{p.template, template}, {p.service, service}} {
				if c.want == nil {
					require.Nil(t, c.part, p.Ref)
					continue
				}
				parts++
				require.Equal(t, c.want, c.part.get(), "%s: the tree kept since the compile", p.Ref)
				runtime.GC()
				runtime.GC()
				require.Nil(t, c.part.tree.Load().Value(), "%s: no one holds the tree, the collector drops it", p.Ref)
				got := c.part.get()
				require.Equal(t, c.want, got, "%s: decoded again", p.Ref)
				require.True(t, reflect.ValueOf(got).UnsafePointer() == reflect.ValueOf(c.part.get()).UnsafePointer(),
					"%s: between two collections, decoded once", p.Ref)
			}
		}
	}
	require.Greater(t, parts, 50, "the cases hold policies")
}

// documentParts returns spec.template and spec.service of the index-th document of a data
// key's text, decoded as parseDocument decodes them.
func documentParts(t *testing.T, text string, index int) (template, service map[string]any) {
	t.Helper()
	docs, err := SplitDocuments(strings.NewReader(text))
	require.NoError(t, err)
	require.Greater(t, len(docs), index)
	obj, err := jsontree.DecodeObject(docs[index].JSON)
	require.NoError(t, err)
	spec, _ := obj["spec"].(map[string]any)
	template, _ = spec["template"].(map[string]any)
	service, _ = spec["service"].(map[string]any)
	return template, service
}
