package jsontree

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/require"
	gomodules "gomodules.xyz/jsonpatch/v2"
)

const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"w","labels":{"a":"b"}},
 "spec":{"containers":[{"name":"worker","image":"x","env":[{"name":"A","value":"1"}]},{"name":"side","image":"y"}],
 "tolerations":[{"key":"k","operator":"Exists"}],"priority":5,"enableServiceLinks":true,"x":null}}`

func TestDecodeIsLazy(t *testing.T) {
	tr := New()
	obj := tr.Decode(json.RawMessage(pod)).(map[string]any)
	require.True(t, IsRaw(obj["metadata"]), "members stay raw until looked into")
	require.True(t, IsRaw(obj["spec"]))
	require.Equal(t, "Pod", obj["kind"], "scalars are decoded with their parent")

	spec, ok := tr.GetMap(obj, "spec")
	require.True(t, ok)
	require.False(t, IsRaw(obj["spec"]), "Get stores the decoded form back")
	require.Equal(t, json.Number("5"), spec["priority"])
	require.Equal(t, true, spec["enableServiceLinks"])
	require.Nil(t, spec["x"])
	containers, _ := tr.Get(spec, "containers")
	list := containers.([]any)
	require.True(t, IsRaw(list[0]))
	c0 := tr.At(list, 0).(map[string]any)
	require.Equal(t, "worker", c0["name"])
	require.True(t, IsRaw(c0["env"]))
	require.True(t, IsRaw(list[1]), "At decodes only the item asked for")

	patch, err := Diff(tr, json.RawMessage(pod), obj)
	require.NoError(t, err)
	require.Equal(t, "[]", string(patch), "decoding changes nothing")
}

func TestExpandAllAndEncodeAgreeWithEncodingJSON(t *testing.T) {
	got, err := Encode(ExpandAll(json.RawMessage(pod)))
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal([]byte(pod), &v))
	want, err := json.Marshal(v) // sorted keys
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))
	require.Equal(t, string(want), string(got), "the same bytes: sorted keys, no HTML escaping needed here")
}

func TestIndexFindsRawAndDecodedItems(t *testing.T) {
	tr := New()
	list := tr.Decode(json.RawMessage(`[{"name":"a","v":1},{"name":"b"},"not an object",{"name":"a","v":2}]`)).([]any)
	byName := nameKey{}
	idx := tr.Index(list, "names", byName)
	require.Equal(t, map[string]int{"a": 0, "b": 1}, idx.Pos, "the first item of a key wins; non-objects are skipped")
	require.True(t, IsRaw(list[0]), "indexing does not decode")
	list = append(list, map[string]any{"name": "c"})
	idx.Add("c", len(list)-1)
	tr.Keep(list, "names", idx)
	require.Same(t, idx, tr.Index(list, "names", byName), "kept for the whole apply")
	require.Equal(t, 4, tr.Indexed(), "the items scanned; appended ones are added, not scanned")
}

type nameKey struct{}

func (nameKey) Of(item map[string]any) string { s, _ := item["name"].(string); return s }
func (nameKey) OfRaw(raw json.RawMessage) (string, bool) {
	if firstByte(raw) != '{' {
		return "", false
	}
	var name string
	eachMember(raw, func(n, v []byte) {
		if string(n) == "name" {
			name = unquote(v)
		}
	})
	return name, true
}

func TestAppendCanonicalMatchesCanonical(t *testing.T) {
	for _, js := range []string{`{"b":1,"a":{"d":[1,"x\u2028"],"c":null}}`, `[{"z":true},{"a":"\u00e9"}]`, `"plain"`, `{"a":1,"a":2}`} {
		var v any
		d := json.NewDecoder(bytes.NewReader([]byte(js)))
		d.UseNumber()
		require.NoError(t, d.Decode(&v))
		require.Equal(t, Canonical(v), string(appendCanonical(nil, []byte(js))), js)
	}
}

// mutate changes a decoded tree through the accessors, driven by ops: every byte picks an
// operation on the member it reaches, so the fuzzer explores sets, deletes and appends at every
// depth.
func mutate(tr *Tree, v any, ops []byte) {
	for i, op := range ops {
		switch t := v.(type) {
		case map[string]any:
			keys := sortedKeys(t)
			if len(keys) == 0 || op%4 == 0 {
				t[fmt.Sprintf("new%d", i)] = map[string]any{"v": json.Number(fmt.Sprint(op))}
				continue
			}
			k := keys[int(op)%len(keys)]
			switch op % 4 {
			case 1:
				delete(t, k)
			case 2:
				t[k] = fmt.Sprintf("s%d", op)
			default:
				next, _ := tr.Get(t, k)
				v = next
			}
		case []any:
			if len(t) == 0 || op%3 == 0 {
				continue // appending would need the parent to store the longer slice
			}
			j := int(op) % len(t)
			if op%3 == 1 {
				t[j] = json.Number("7")
				continue
			}
			v = tr.At(t, j)
		default:
			return
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// FuzzDiff is the kernel's differential test: for any JSON object and any changes made through
// the accessors, the JSONPatch Diff writes, applied to the input, gives exactly what Encode
// writes of the changed tree, the same bytes every time, and the same object as the patch that
// gomodules.xyz/jsonpatch (what controller-runtime uses) computes from the two documents.
func FuzzDiff(f *testing.F) {
	f.Add([]byte(pod), []byte{3, 7, 11, 2})
	f.Add([]byte(`{"a":[1,{"b":"c"}],"d":{"e":null}}`), []byte{3, 1, 0, 4})
	f.Add([]byte(`{"x~y/z":{"\u00e9":"\u2028"}}`), []byte{3, 2})
	f.Fuzz(func(t *testing.T, doc []byte, ops []byte) {
		// A document with a repeated key is no object the API server sends (it re-encodes what it
		// decoded) and is refused on every other path (SplitDocuments); JSON Patch libraries
		// disagree on which member a path names there.
		if !json.Valid(doc) || firstByte(doc) != '{' || CheckDepth(doc, 64) != nil || hasEmptyKey(ExpandAll(json.RawMessage(doc))) ||
			CheckDuplicateKeys(doc) != nil {
			return
		}
		tr := New()
		obj := tr.Decode(json.RawMessage(doc))
		mutate(tr, obj, ops)
		patch, err := Diff(tr, json.RawMessage(doc), obj)
		require.NoError(t, err)
		for range 3 {
			again, err := Diff(tr, json.RawMessage(doc), obj)
			require.NoError(t, err)
			require.Equal(t, string(patch), string(again), "deterministic")
		}
		want, err := Encode(obj)
		require.NoError(t, err)
		require.True(t, json.Valid(want), "%s", want)

		p, err := jsonpatch.DecodePatch(patch)
		require.NoError(t, err, "%s", patch)
		got, err := p.Apply(doc)
		require.NoError(t, err, "patch %s on %s", patch, doc)
		require.JSONEq(t, string(want), string(got), "patch %s", patch)

		refOps, err := gomodules.CreatePatch(doc, want)
		if err != nil {
			return // it refuses some documents (duplicate keys); nothing to compare
		}
		ref, err := json.Marshal(refOps)
		require.NoError(t, err)
		rp, err := jsonpatch.DecodePatch(ref)
		require.NoError(t, err)
		viaRef, err := rp.Apply(doc)
		require.NoError(t, err)
		require.JSONEq(t, string(viaRef), string(got))
	})
}

// hasEmptyKey reports an object member named "": its JSON pointer ("//x") is right (RFC 6901),
// but evanphx/json-patch does not resolve it, and no Kubernetes object has one.
func hasEmptyKey(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if k == "" || hasEmptyKey(x) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if hasEmptyKey(x) {
				return true
			}
		}
	}
	return false
}

// TestFieldNamesAreUnquoted: a member name taken from fieldNames is what unquote returns.
func TestFieldNamesAreUnquoted(t *testing.T) {
	for n, k := range fieldNames {
		if got := unquote([]byte(`"` + n + `"`)); got != k || k != n {
			t.Errorf("fieldNames[%q] = %q, unquote gives %q", n, k, got)
		}
	}
	m := Expand(json.RawMessage(`{"name":1,"n\u0061me2":2,"unlisted":3}`)).(map[string]any)
	if len(m) != 3 || m["name"] == nil || m["name2"] == nil || m["unlisted"] == nil {
		t.Errorf("Expand = %v", m)
	}
}
