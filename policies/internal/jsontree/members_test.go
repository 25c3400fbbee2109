package jsontree

import (
	"encoding/json"
	"testing"
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
