package jsontree_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// tokens counts the JSON tokens of a valid value; numbers are read as written, so that one
// beyond float64 (1e700) is still one token.
func tokens(t testing.TB, raw []byte) int {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n := 0
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return n
		}
		require.NoError(t, err)
		n++
	}
}

// hasDuplicate is the oracle of CheckDuplicateKeys: decoding keeps one member per key, so a
// value repeats a key exactly when its decoded form has fewer tokens than its text.
func hasDuplicate(t testing.TB, raw []byte) bool {
	v, err := jsontree.Decode(raw)
	require.NoError(t, err)
	again, err := jsontree.Encode(v)
	require.NoError(t, err)
	return tokens(t, again) != tokens(t, raw)
}

// genValue writes a random value whose objects draw their keys from a small set, so that
// some repeat one, at any depth.
func genValue(r *rand.Rand, b *strings.Builder, depth int) {
	switch k := r.Intn(6); {
	case depth > 4 || k < 2:
		b.WriteString([]string{`1`, `"s"`, `null`, `true`, `1.50`}[r.Intn(5)])
	case k < 4:
		b.WriteString("{")
		for i := range r.Intn(4) {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(b, "%q:", []string{"a", "b", "c", "d", "e", "f"}[r.Intn(6)])
			genValue(r, b, depth+1)
		}
		b.WriteString("}")
	default:
		b.WriteString("[")
		for i := range r.Intn(4) {
			if i > 0 {
				b.WriteString(",")
			}
			genValue(r, b, depth+1)
		}
		b.WriteString("]")
	}
}

// TestCheckDuplicateKeysAgreesWithDecoding compares the token walk with the oracle on
// generated values, with and without duplicates.
func TestCheckDuplicateKeysAgreesWithDecoding(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	seen := map[bool]int{}
	for range 5000 {
		var b strings.Builder
		genValue(r, &b, 0)
		raw := []byte(b.String())
		want := hasDuplicate(t, raw)
		seen[want]++
		err := jsontree.CheckDuplicateKeys(raw)
		require.Equal(t, want, err != nil, "%s: %v", raw, err)
	}
	require.Greater(t, seen[true], 100)
	require.Greater(t, seen[false], 100)
}

// TestCheckDuplicateKeysReadsEveryNumber: a number beyond float64 is valid JSON; only a repeated
// key is an error (found by FuzzValues: the walk read numbers as float64 and failed on it).
func TestCheckDuplicateKeysReadsEveryNumber(t *testing.T) {
	require.NoError(t, jsontree.CheckDuplicateKeys([]byte(`{"a": 1e400, "b": [-1e400, 123456789012345678901234567890]}`)))
	require.ErrorContains(t, jsontree.CheckDuplicateKeys([]byte(`{"a": 1e400, "a": 1}`)), `key "a" already set`)
}

// TestValuesSplitsAStream: the values of a stream come back as written, in order.
func TestValuesSplitsAStream(t *testing.T) {
	values := jsontree.NewValues([]byte(" {\"a\": 1}\n[1, 2]\n\"s\" 3 "))
	var got []string
	for {
		raw, err := values.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		got = append(got, string(raw))
	}
	require.Equal(t, []string{`{"a": 1}`, `[1, 2]`, `"s"`, `3`}, got)

	_, err := jsontree.NewValues([]byte("{a: 1}")).Next()
	var syntax *json.SyntaxError
	require.ErrorAs(t, err, &syntax)

	_, err = jsontree.NewValues([]byte(strings.Repeat("[", 20000))).Next()
	require.ErrorIs(t, err, jsontree.ErrDecoderDepth)
}

// FuzzValues: every value of any stream is valid JSON, and CheckDuplicateKeys agrees with the
// decoding oracle on it.
func FuzzValues(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `[{"a":{"b":1,"b":2}}] {"c":[]}`, `{"a":{"a":1}}`, `{} [] 1 "x"`, `{"a":1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		values := jsontree.NewValues(text)
		for range 100 {
			raw, err := values.Next()
			if err != nil {
				return
			}
			require.True(t, json.Valid(raw), "%q", raw)
			if jsontree.CheckDepth(raw, 64) != nil {
				continue
			}
			err = jsontree.CheckDuplicateKeys(raw)
			require.Equal(t, hasDuplicate(t, raw), err != nil, "%q: %v", raw, err)
		}
	})
}

// TestCountNodes pins the count of each kind of node, and checks it against a full decode.
func TestCountNodes(t *testing.T) {
	for js, want := range map[string]int{
		`null`:                            1,
		`"a,[{"`:                          1,
		`[]`:                              1,
		`{}`:                              1,
		`[1, -2.5e3, true, false, null]`:  6,
		`{"a": 1, "b\"": [{"c": "]"}]}`:   8,
		"[\n  {\"x\":{\"y\":[[],{}]}}\n]": 8,
	} {
		n, at := jsontree.CountNodes([]byte(js), 1<<20)
		require.Equal(t, want, n, js)
		require.Equal(t, len(js), at)
		n, at = jsontree.CountNodes([]byte(js), want-1)
		require.Equal(t, want, n, "stops beyond the bound: %s", js)
		require.Less(t, at, len(js)+1)
	}
	var v any
	big := `{"items": [` + strings.Repeat(`{"a": [1, "x", null], "b": {}},`, 100) + `{}]}`
	require.NoError(t, json.Unmarshal([]byte(big), &v))
	n, _ := jsontree.CountNodes([]byte(big), 1<<20)
	require.Equal(t, 1+1+1+100*(1+1+1+3+1+1)+1, n)
}

// FuzzCountNodes checks CountNodes against encoding/json's token stream of any valid JSON:
// every value and every object key is one node (repeated keys and numbers beyond float64
// included, which a decode into Go values would drop or refuse).
func FuzzCountNodes(f *testing.F) {
	f.Add([]byte(`{"a": [1, "x\"]", {"b": null}], "c": {}}`))
	f.Add([]byte(` [ -1.5e3 , true,false ] `))
	f.Add([]byte(`1e700`))
	f.Add([]byte(`{"a": 1, "a": [2]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		got, at := jsontree.CountNodes(data, 1<<30)
		require.Equal(t, tokenNodes(t, data), got, "%s", data)
		require.Equal(t, len(data), at)
	})
}

// tokenNodes counts the values and object keys of one JSON value from encoding/json's tokens.
func tokenNodes(t *testing.T, data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct{ object, wantKey bool }
	var stack []frame
	n := 0
	valueRead := func() { // in an object, a key comes next
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return n
		}
		require.NoError(t, err)
		switch tok {
		case json.Delim('{'), json.Delim('['):
			n++
			valueRead()
			stack = append(stack, frame{object: tok == json.Delim('{'), wantKey: true})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			n++
			if top := len(stack) - 1; top >= 0 && stack[top].object && stack[top].wantKey {
				stack[top].wantKey = false // a key: its value comes next
			} else {
				valueRead()
			}
		}
	}
}
