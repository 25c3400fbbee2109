package yamljson_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/podpatch/podpatch/internal/hostiletest"
	"github.com/podpatch/podpatch/internal/yamljson"
)

// treeNodes parses text as go-yaml does in ToJSON and counts the nodes of its tree as the
// converter does (the document node not counted); ok is false when the text is not exactly one
// document go-yaml accepts.
func treeNodes(text []byte) (n int, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return 0, false
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return 0, false
	}
	var count func(*yaml.Node) int
	count = func(x *yaml.Node) int {
		c := 1
		if x.Kind == yaml.DocumentNode {
			c = 0
		}
		for _, k := range x.Content {
			c += count(k)
		}
		return c
	}
	return count(&doc), true
}

// checkLowerBound fails when prescan counts more nodes than go-yaml composes for a text it
// accepts.
func checkLowerBound(t *testing.T, text []byte) {
	t.Helper()
	pre, _ := yamljson.Prescan(text, math.MaxInt)
	if n, ok := treeNodes(text); ok && pre > n {
		t.Fatalf("prescan counted %d nodes, go-yaml composed %d, for\n%s", pre, n, text)
	}
}

// TestPrescanTable pins prescan's count on each construct it reads or skips.
func TestPrescanTable(t *testing.T) {
	for text, want := range map[string]int{
		"":                                    0,
		"a":                                   0,
		"[1, 2, 3]":                           4,
		"[1, 2, 3,]":                          4,
		"[[],]":                               2,
		"{a: 1, b: [x, y]}":                   7,
		"{\"a\":[1,2],\"b\":\"x, [y]\"}":      7,
		"{a:\"b, c\"}":                        5, // a plain scalar `a:"b`: its quote is no quote
		"[a # , [\n , b]":                     3,
		"a: 1\nb: 2\n":                        4,
		"- 1\n- 2\n-\n":                       3,
		"- - - x\n":                           3,
		"- a: 1\n  b: 2\n":                    5,
		"? a\n: b\n":                          2,
		"a: 'x: y, [z'' - w\n  - v'\n":        2,
		"a: \"x: \\\" y\n  - v\"\n":           2,
		"a: x # - b: c\n":                     2,
		"# a: [1, 2]\n- x\n":                  1,
		"a: |\n  - b: [1, 2]\n  c: d\ne: f\n": 4,
		"a: >-\n\n   - x\n  - y\nb:\n":        5,
		"- |2\n   - x\n- y\n":                 2,
		"a: b\n  - c\n  - d [1]\ne: f\n":      4, // b - c - d [1] is one plain scalar
		"a:\n  b\n  - c\n":                    2,
		"foo\n- a\n- b\n":                     0,
		"--- [1, 2]\n":                        3,
		"%YAML 1.2\n---\n- a: 1\n":            3,
		"a: b\"\nc: [1, 2]\n":                 6, // the quote inside a plain scalar opens nothing
		"a: \"b\nc: [1, 2]\"\nd: 1\n":         4,
	} {
		got, _ := yamljson.Prescan([]byte(text), math.MaxInt)
		require.Equal(t, want, got, "%q", text)
		checkLowerBound(t, []byte(text))
	}
}

// attackShapes are the hostile-input shapes (texts of a few megabytes that go-yaml would turn
// into a gigabyte tree), each n nodes or more, written densely.
func attackShapes(n int) map[string]string {
	return map[string]string{
		"flow list":                        "[" + strings.Repeat("0,", n) + "0]",
		"flow list in a key":               "a: [" + strings.Repeat("0,", n) + "0]\n",
		"block list":                       strings.Repeat("- 0\n", n),
		"bare block list":                  strings.Repeat("-\n", n),
		"nested flow maps":                 "[" + strings.Repeat("{a: {b: 0}},", n/3) + "0]",
		"flow maps in a list":              "[" + strings.Repeat("{},", n) + "{}]",
		"long mapping":                     strings.Repeat("k: 0\n", n), // duplicate keys: refused after the parse
		"long flow mapping":                "{" + strings.Repeat("k: 0,", n) + "}",
		"explicit keys":                    strings.Repeat("? k\n", n),
		"compact nested lists":             strings.Repeat("- - 0\n", n/2),
		"mix":                              strings.Repeat("- a: [0, {b: 0}]\n", n/4+1),
		"after a block scalar":             "a: |\n  text\nb: [" + strings.Repeat("0,", n) + "0]\n",
		"inside a block scalar":            "a: |\n  x\n" + strings.Repeat("- 0\n", n),
		"after a comment":                  "# x\n" + strings.Repeat("- 0 # c\n", n),
		"after a quoted scalar":            "a: \"x\n  y\"\nb: [" + strings.Repeat("0,", n) + "0]\n",
		"behind a quote in a plain scalar": "a: b\"\nc: [" + strings.Repeat("0,", n) + "0]\n",
		"deep block lists":                 strings.Repeat("- ", 60) + "[" + strings.Repeat("0,", n) + "0]\n",
	}
}

// TestPrescanRefusesAttackShapes checks that every shape with more nodes than the bound is
// refused before it is parsed, with the line where the bound was passed.
func TestPrescanRefusesAttackShapes(t *testing.T) {
	const max = 2000
	for name, text := range attackShapes(max + 10) {
		t.Run(name, func(t *testing.T) {
			n, line := yamljson.Prescan([]byte(text), max)
			require.Greater(t, n, max)
			require.Positive(t, line)
			if name == "inside a block scalar" { // the shape is a block list after a scalar
				require.Greater(t, line, 2)
			}
			lim := yamljson.Limits{Text: 1 << 20, Depth: 64, Nodes: max, JSON: 1 << 20}
			var err error
			alloc := hostiletest.Allocated(func() { _, err = yamljson.ToJSON(context.Background(), []byte(text), lim) })
			var le *yamljson.LimitError
			require.ErrorAs(t, err, &le)
			require.Equal(t, yamljson.LimitNodes, le.Kind)
			require.Less(t, alloc, uint64(len(text)/2+64<<10), "the parser ran: %d bytes", alloc)
		})
	}
}

// TestPrescanIsALowerBound checks prescan against go-yaml's own tree on generated YAML (the
// grammar of gen_test.go, every hostile construct included), the attack shapes, random
// mutations of them, the checked-in fuzz corpora and every YAML file of the repository
// (manifests, fixtures, golden cases): prescan never counts more nodes than go-yaml composes.
func TestPrescanIsALowerBound(t *testing.T) {
	r := rand.New(rand.NewSource(33))
	for range 3000 {
		b := make([]byte, 8+r.Intn(400))
		r.Read(b)
		text, _, _ := generate(b, 0)
		checkLowerBound(t, []byte(text))
		for _, doc := range strings.Split(text, "---") {
			checkLowerBound(t, []byte(doc))
		}
	}
	alphabet := []byte("-?:,[]{}#'\"|>!&* \n\n  ab01\\")
	for name, text := range attackShapes(20) {
		checkLowerBound(t, []byte(text))
		for range 300 {
			b := []byte(text)
			for range 1 + r.Intn(4) {
				b[r.Intn(len(b))] = alphabet[r.Intn(len(alphabet))]
			}
			if n, ok := treeNodes(b); ok {
				pre, _ := yamljson.Prescan(b, math.MaxInt)
				require.LessOrEqual(t, pre, n, "%s mutated:\n%s", name, b)
			}
		}
	}
	files := 0
	for _, root := range []string{"testdata", "../../policies/testdata", "../../manifests", "../../policytest/testdata", "../../docs"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" && ext != ".json" && !strings.Contains(path, "fuzz") {
				return nil
			}
			text, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			checkLowerBound(t, text)
			for _, doc := range bytes.Split(text, []byte("\n---")) {
				checkLowerBound(t, doc)
			}
			return nil
		})
		if !errors.Is(err, fs.ErrNotExist) {
			require.NoError(t, err)
		}
	}
	require.Greater(t, files, 100)
}

// FuzzPrescan checks that prescan is a lower bound of go-yaml's node count for any text go-yaml
// accepts as one document, and for the generated stream of the hostile-YAML grammar.
// Run it long with: go test -run '^$' -fuzz FuzzPrescan -fuzztime 30m ./internal/yamljson
func FuzzPrescan(f *testing.F) {
	for _, text := range attackShapes(3) {
		f.Add([]byte(text))
	}
	f.Add([]byte("a: b\n  - c\n- |\n  x\n? [a, b]\n: {c: 'd''e', \"f\": \"g\\\"\"}\n"))
	// Every line break go-yaml reads, where one ends a comment, an indentation, a plain scalar.
	for _, br := range []string{"\r", "\r\n", "\u0085", "\u2028", "\u2029"} {
		f.Add([]byte("#" + br + "0\n?"))
		f.Add([]byte("a: b" + br + "  - c" + br + "- [x, y]" + br + "? k" + br + ": v"))
		f.Add([]byte("- 'a" + br + "b'" + br + "- \"c" + br + "d\"" + br + "- |" + br + "  e" + br + "- f"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 16<<10 {
			return
		}
		checkLowerBound(t, data)
		text, _, _ := generate(data, 0)
		checkLowerBound(t, []byte(text))
	})
}
