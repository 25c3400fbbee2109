package yamljson_test

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/internal/yamljson"
)

// TestFlowMappingAliasBomb: a 24 KB flow mapping whose anchors and aliases follow `:` directly,
// which expanded to gigabytes, is refused before anything is expanded.
func TestFlowMappingAliasBomb(t *testing.T) {
	text := hostiletest.FlowMappingAliasBomb(5, 10, 4000, 2300, false)
	require.Greater(t, len(text), 20<<10)
	_, err := checkBounded(t, text)
	require.ErrorIs(t, err, yamljson.ErrRefused)
	require.ErrorContains(t, err, "line 1: YAML anchor &s0")
	// As a policy annotation in block context, and as a ConfigMap's data in a file.
	doc := "spec:\n  template:\n    metadata:\n      annotations: " + text + "\n"
	_, err = checkBounded(t, doc)
	require.ErrorIs(t, err, yamljson.ErrRefused)
	require.ErrorContains(t, err, "line 4:")
}

// TestRefusedEverywhere places each refused construct in every syntactic position, and the
// same characters where they are harmless.
func TestRefusedEverywhere(t *testing.T) {
	refused := map[string]string{
		"anchor after colon, flow JSON key": `{"a":&x 1, "b":*x}`,
		"alias after colon, flow JSON key":  `{"a":1, "b":*x}`,
		"anchor after comma":                "[1,&x 2]",
		"anchor after bracket":              "[&x 1]",
		"anchor after brace (key)":          "{&x a: 1}",
		"anchor on a flow collection":       "{a: &x {b: 1}}",
		"anchor after question mark":        "{? &x a : 1}",
		"anchor after dash":                 "- &x 1\n",
		"anchor on a block mapping":         "a: &x\n  b: 1\n",
		"anchor on a block sequence":        "a: &x\n- 1\n",
		"anchor on a block key":             "&x a: 1\n",
		"anchor on a document":              "&x {a: 1}",
		"anchor on an explicit block key":   "? &x a\n: 1\n",
		"anchor on a block scalar":          "a: &x |\n  text\n",
		"anchor after a tag":                "a: !!str &x b\n",
		"anchor before a tag":               "a: &x !!str b\n",
		"anchor with a comment":             "a: &x # c\n  b: 1\n",
		"alias as a block key":              "a: &x k\n*x : 1\n",
		"alias as a flow key":               "{a: &x k, *x : 1}",
		"alias in a block sequence":         "- &x 1\n- *x\n",
		"alias of a mapping":                "a: &x {b: 1}\nc: *x\n",
		"alias before a comment":            "a: &x 1\nb: *x # c\n",
		"unknown alias":                     "a: *x\n",
		"merge key, block":                  "a: {b: 1}\nc:\n  <<: {d: 1}\n",
		"merge key, flow":                   "{<<: {d: 1}}",
		"merge key of an alias":             "a: &x {b: 1}\nc: {<<: *x}\n",
		"merge tag":                         "a: !!merge <<\n",
		"custom local tag":                  "a: !foo b\n",
		"custom tag on a mapping":           "a: !foo {b: 1}\n",
		"custom tag on a block mapping":     "a: !foo\n  b: 1\n",
		"verbatim tag":                      "a: !<tag:example.com,2000:x> b\n",
		"binary tag":                        "a: !!binary aGVsbG8=\n",
		"timestamp tag":                     "a: !!timestamp 2001-12-14\n",
		"set tag":                           "a: !!set {b}\n",
		"omap tag":                          "a: !!omap [b: 1]\n",
		"core tag of another kind":          "a: !!str {b: 1}\n",
		"redefined core tag handle":         "%TAG !! tag:example.com,2000:\n---\na: !!str b\n",
		"tag on a key":                      "!foo a: 1\n",
	}
	for name, text := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := checkBounded(t, text)
			require.Error(t, err)
			require.ErrorIs(t, err, yamljson.ErrRefused)
			if name != "unknown alias" && name != "alias after colon, flow JSON key" {
				require.ErrorContains(t, err, "line ")
			}
		})
	}
	accepted := map[string]string{
		"anchor characters in quotes":   `{"a": "&x *y <<: !tag", 'b': '*z'}`,
		"anchor characters in comments": "a: 1 # &x *y <<: !tag\n# *z\n",
		"anchor characters in a block":  "a: |\n  &x *y\n  <<: !foo\n",
		"quoted merge key":              `{"<<": 1}`,
		"core tags":                     "a: !!str 1\nb: !!int 2\nc: !!map {d: !!null ~}\ne: !!seq [!!bool true, !!float 1.5]\n",
		"verbatim core tag":             "a: !<tag:yaml.org,2002:str> b\n",
		"ampersand inside a plain":      "a: b&c*d\n",
	}
	for name, text := range accepted {
		t.Run(name, func(t *testing.T) {
			_, err := checkBounded(t, text)
			require.NoError(t, err)
		})
	}
}

// TestGeneratedShapes runs thousands of streams of the grammar (gen_test.go), deterministic,
// through the front end: every hostile one is refused, every other converts exactly.
func TestGeneratedShapes(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	hostile, clean := 0, 0
	for range 3000 {
		b := make([]byte, 8+r.Intn(400))
		r.Read(b)
		text, docs, h := generate(b, 0)
		checkGenerated(t, text, docs, h)
		if h {
			hostile++
		} else {
			clean++
		}
	}
	require.Greater(t, hostile, 500)
	require.Greater(t, clean, 500)
	// Each construct at every position it can take.
	for _, force := range []int{hostileAnchor, hostileTag, hostileMerge} {
		for range 300 {
			b := make([]byte, 8+r.Intn(200))
			r.Read(b)
			text, docs, h := generate(b, force) // h is false only for a stream with no place for it
			checkGenerated(t, text, docs, h)
		}
	}
}

// TestLimitsAreNamed checks that each bound stops a text and its error names it.
func TestLimitsAreNamed(t *testing.T) {
	lim := yamljson.Limits{Text: 4096, Depth: 8, Nodes: 100, JSON: 256}
	for _, tc := range []struct {
		text, want, kind string
	}{
		{strings.Repeat("#", 4097), "more than 4096 bytes of YAML text", yamljson.LimitText},
		{strings.Repeat("[", 9) + strings.Repeat("]", 9), "nested deeper than 8 levels", yamljson.LimitDepth},
		{strings.Repeat("[", 20000) + strings.Repeat("]", 20000), "nested deeper than 8 levels", yamljson.LimitDepth},
		{"[" + strings.Repeat("1,", 100) + "1]", "more than 100 YAML nodes", yamljson.LimitNodes},
		{"a: " + strings.Repeat("x", 300), "more than 256 bytes as JSON", yamljson.LimitJSON},
		{"[" + strings.Repeat("~,", 60) + "~]", "more than 256 bytes as JSON", yamljson.LimitJSON},
	} {
		lim := lim
		if len(tc.text) > lim.Text && tc.kind != yamljson.LimitText {
			lim.Text = len(tc.text)
		}
		_, err := yamljson.ToJSON(context.Background(), []byte(tc.text), lim)
		require.ErrorContains(t, err, tc.want)
		var le *yamljson.LimitError
		require.True(t, errors.As(err, &le), "%v", err)
		require.Equal(t, tc.kind, le.Kind)
	}
	_, err := yamljson.ToJSON(context.Background(), []byte("a: 1\n...\n--- {b: 2}\n"), testLimits)
	require.ErrorIs(t, err, yamljson.ErrSeveralDocuments, "the caller splits a stream at its --- lines")
	_, err = yamljson.ToJSON(context.Background(), []byte("a: 1\n--- {b: 2}\n"), testLimits)
	require.ErrorIs(t, err, yamljson.ErrSeveralDocuments)
	_, err = yamljson.ToJSON(context.Background(), []byte("a: 1\n...\n--- {b: 2}\n"), testLimits)
	require.ErrorIs(t, err, yamljson.ErrSeveralDocuments)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = yamljson.ToJSON(ctx, []byte("a: 1"), testLimits)
	require.ErrorIs(t, err, context.Canceled)
	_, err = yamljson.ToJSON(ctx, []byte("["+strings.Repeat("1,", 5000)+"1]"), testLimits)
	require.ErrorIs(t, err, context.Canceled)
}

// TestConversion pins the JSON of the scalars, keys and duplicates.
func TestConversion(t *testing.T) {
	for text, want := range map[string]string{
		"a: yes\nb: on\nc: 0x10\nd: 1.50\ne: 2001-12-14\nf: ~\n": `{"a":"yes","b":"on","c":16,"d":1.5,"e":"2001-12-14","f":null}`,
		"1: a\ntrue: b\nnull: c\n1.5: d\n":                       `{"1":"a","true":"b","null":"c","1.5":"d"}`,
		"a: \"\\u0001<&>\"\n":                                    `{"a":"\u0001\u003c\u0026\u003e"}`,
		"":                                                       "null",
		"# only a comment\n":                                     "null",
		"a: 1\na: 2\n":                                           "",
		"a: 1\n\"a\": 2\n":                                       "",
		"? [a]\n: 1\n":                                           "",
		"a: .inf\n":                                              "",
		"a: !!int b\n":                                           "",
		"a: 18446744073709551615\nb: -9223372036854775808\n": `{"a":18446744073709551615,"b":-9223372036854775808}`,
	} {
		js, err := yamljson.ToJSON(context.Background(), []byte(text), testLimits)
		if want == "" {
			require.Error(t, err, "%q gave %s", text, js)
			continue
		}
		require.NoError(t, err, text)
		require.JSONEq(t, want, string(js), text)
	}
}

// TestParserCostIsLinear measures go-yaml's tree on the densest shapes: the memory a text costs
// stays within maxBytesPerTextByte per byte, whatever its shape (Limits.Text bounds the rest).
func TestParserCostIsLinear(t *testing.T) {
	const size = 128 << 10
	for name, text := range map[string]string{
		"flow integers":        "[" + strings.Repeat("0,", size/2-1) + "0]",
		"block sequence":       strings.Repeat("- 0\n", size/4),
		"comments in flow":     "[" + strings.Repeat("0, #\n", size/5) + "0]",
		"flow keys":            "{" + strings.Repeat("a: 1,", size/5) + "}",
		"simple keys":          "[" + strings.Repeat("a: 1,", size/5) + "]",
		"explicit keys":        "{" + strings.Repeat("? a,", size/4) + "}",
		"empty collections":    "[" + strings.Repeat("{},", size/3) + "]",
		"deep flow":            strings.Repeat("[", 9999) + strings.Repeat("]", 9999),
		"deep compact lists":   strings.Repeat("- ", 9999) + "x\n",
		"deep past the parser": strings.Repeat("- ", 10001) + "x\n",
		"anchors":              "[" + strings.Repeat("&a 0,", size/5) + "0]",
		"aliases":              "[&a 0," + strings.Repeat("*a,", size/3) + "0]",
	} {
		t.Run(name, func(t *testing.T) {
			_, _ = checkBounded(t, text) //nolint:errcheck // only the work is checked
		})
	}
}
