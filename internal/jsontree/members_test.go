package jsontree

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// scalarOfDecoded is the Scalar of a member Expand decoded.
func scalarOfDecoded(v any) Scalar {
	switch t := v.(type) {
	case string:
		return Scalar{Kind: String, Text: t}
	case json.Number:
		return Scalar{Kind: Number, Text: string(t)}
	case bool:
		if t {
			return Scalar{Kind: Bool, Text: "true"}
		}
		return Scalar{Kind: Bool, Text: "false"}
	case json.RawMessage:
		if firstByte(t) == '[' {
			return Scalar{Kind: List}
		}
		return Scalar{Kind: Object}
	}
	return Scalar{Kind: Null}
}

// FuzzMembers: for any JSON object, Members reads each named member as Expand decodes it (the
// last of repeated names last), calls nothing for names the object lacks, and CanonicalObject
// is Canonical of the object decoded; for anything else both refuse.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(pod), "metadata", "kind")
	f.Add([]byte(`{"name":"a","name":"b","x\u0079":1e3,"n":null,"t":true,"l":[1]}`), "name", "xy")
	f.Add([]byte(` {"a" : "\u00e9\"" , "b":{"c":[]}}`), "a", "b")
	f.Add([]byte(`["a"]`), "a", "b")
	f.Fuzz(func(t *testing.T, doc []byte, a, b string) {
		if !json.Valid(doc) || CheckDepth(doc, 64) != nil {
			return
		}
		raw := json.RawMessage(doc)
		names := []string{a, b, a}
		got := map[int]Scalar{}
		calls := 0
		isObject := Members(raw, names, func(i int, v Scalar) { got[i] = v; calls++ })
		canon, canonOK := CanonicalObject(raw)
		m, ok := Expand(raw).(map[string]any)
		if ok != isObject || ok != canonOK {
			t.Fatalf("%s: Members says object %v, CanonicalObject %v, Expand %v", doc, isObject, canonOK, ok)
		}
		if !ok {
			if calls > 0 {
				t.Fatalf("%s: not an object, and Members called f", doc)
			}
			return
		}
		for i, n := range names {
			want, has := m[n]
			v, called := got[i]
			if has != called {
				t.Fatalf("%s: member %q present %v, read %v", doc, n, has, called)
			}
			if has && scalarOfDecoded(want) != v {
				t.Fatalf("%s: member %q is %#v, Members read %#v", doc, n, want, v)
			}
		}
		if want := Canonical(ExpandAll(raw)); canon != want {
			t.Fatalf("%s: CanonicalObject %s, Canonical %s", doc, canon, want)
		}
	})
}

// TestMemberAndItems: Member finds the first member of that name and stops there, Items reads
// every item until told to stop; both refuse other kinds of values.
func TestMemberAndItems(t *testing.T) {
	raw := json.RawMessage(` {"a": 1, "m" : {"x": [1, {"y": "]"}, "z\"]"]}, "m": 2, "b": "}"} `)
	m, ok := Member(raw, "m")
	require.True(t, ok)
	require.JSONEq(t, `{"x": [1, {"y": "]"}, "z\"]"]}`, string(m))
	_, ok = Member(raw, "nope")
	require.False(t, ok)
	_, ok = Member(json.RawMessage(`[1]`), "m")
	require.False(t, ok)

	x, _ := Member(m, "x")
	var items []string
	require.True(t, Items(x, func(it json.RawMessage) bool { items = append(items, string(it)); return true }))
	require.Equal(t, []string{`1`, `{"y": "]"}`, `"z\"]"`}, items)
	items = nil
	require.True(t, Items(x, func(it json.RawMessage) bool { items = append(items, string(it)); return len(items) < 2 }))
	require.Len(t, items, 2)
	require.True(t, Items(json.RawMessage(` [ ] `), func(json.RawMessage) bool { t.Fatal("no items"); return true }))
	require.False(t, Items(raw, func(json.RawMessage) bool { return true }))
}
