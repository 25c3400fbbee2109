// Package yamljson is podpatch's one YAML front end: every YAML text podpatch reads from a user
// — policy documents in ConfigMap data, the ConfigMap files of lint, render and --policy-dir,
// the object streams of render — is converted to JSON here, and only here.
//
// YAML is hostile input on a fail-open path (reference §3 "Limits"). The conversion is bounded in
// the input's bytes, nesting depth, node count and output bytes, and refuses, at the node level
// of the parser and before anything is expanded, every construct that lets a small text stand
// for a large value: anchors (&a), aliases (*a), merge keys (<<) and tags beyond the core
// schema. go.yaml.in/yaml/v3 composes a document into a tree of yaml.Node in which an alias is
// one node pointing at its anchor (decode.go: parser.alias), and this package never follows
// that pointer, so what it does is linear in the text whatever the text's shape.
//
// Scalars are resolved by the YAML 1.2 core schema (go.yaml.in/yaml/v3): `yes`, `on`, `no` and
// `off` are strings, not booleans.
package yamljson

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/podpatch/podpatch/internal/jsontree"
)

// Limits bounds one conversion. Every field must be positive.
type Limits struct {
	// Text bounds the bytes of the YAML text, checked before it is parsed: the parser's tree
	// costs up to a few hundred bytes of memory per byte of text (TestParserCostIsLinear).
	Text int
	// Depth bounds the nesting of mappings and sequences.
	Depth int
	// Nodes bounds the nodes of the document (keys, values, items). A lower bound of them is
	// counted in the text before it is parsed (prescan), the rest as they are converted.
	Nodes int
	// JSON bounds the bytes of the JSON written, checked as it is written.
	JSON int
}

// Kinds of limit, for LimitError.
const (
	LimitText  = "text"
	LimitDepth = "depth"
	LimitNodes = "nodes"
	LimitJSON  = "json"
)

// LimitError says which bound of Limits a text is beyond.
type LimitError struct {
	// Kind is one of the Limit* constants.
	Kind string
	// Max is the bound.
	Max int
	// Line is where in the text, from 1, or 0 when the whole text is meant.
	Line int
}

func (e *LimitError) Error() string {
	var msg string
	switch e.Kind {
	case LimitText:
		msg = fmt.Sprintf("more than %d bytes of YAML text", e.Max)
	case LimitDepth:
		msg = fmt.Sprintf("nested deeper than %d levels", e.Max)
	case LimitNodes:
		msg = fmt.Sprintf("more than %d YAML nodes", e.Max)
	default:
		msg = fmt.Sprintf("more than %d bytes as JSON", e.Max)
	}
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, msg)
	}
	return msg
}

// ErrRefused is wrapped by every error about a YAML construct podpatch does not accept:
// anchors, aliases, merge keys and tags beyond the core schema.
var ErrRefused = errors.New("not accepted")

// Why each construct is refused, for the error's reader.
const (
	expands = " (they let a small text expand without bound; write the value out)"
	typed   = " (podpatch reads plain data; remove the tag)"
)

// ErrSeveralDocuments is returned for a text holding more than one document: the caller splits
// a stream at its `---` lines and converts each document alone.
var ErrSeveralDocuments = errors.New("a second YAML document starts inside this one (`---` followed by content, or `...`); put each `---` on a line of its own")

// checkEvery is how many nodes are converted between two looks at the context.
const checkEvery = 1024

// coreTags are the tags a node may carry explicitly: the YAML 1.2 core schema's.
var coreTags = map[string]yaml.Kind{
	"!!str": yaml.ScalarNode, "!!int": yaml.ScalarNode, "!!float": yaml.ScalarNode,
	"!!bool": yaml.ScalarNode, "!!null": yaml.ScalarNode,
	"!!map": yaml.MappingNode, "!!seq": yaml.SequenceNode,
}

// ToJSON converts one YAML document to JSON. A text with no document (only comments, or
// nothing) converts to `null`. It fails with a *LimitError beyond lim, with ErrRefused for an
// anchor, alias, merge key or custom tag, with ErrSeveralDocuments for a second document, and
// with ctx's error once ctx is done. Mapping keys must be scalars and unique.
func ToJSON(ctx context.Context, text []byte, lim Limits) (js []byte, err error) {
	if len(text) > lim.Text {
		return nil, &LimitError{Kind: LimitText, Max: lim.Text}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The parser composes the whole tree before a node can be counted: count first.
	switch n, line, deep := prescan(text, lim.Nodes, lim.Depth); {
	case deep:
		return nil, &LimitError{Kind: LimitDepth, Max: lim.Depth, Line: line}
	case n > lim.Nodes:
		return nil, &LimitError{Kind: LimitNodes, Max: lim.Nodes, Line: line}
	}
	defer func() {
		// go.yaml.in/yaml/v3 panics on a few inputs it considers internal errors ("please
		// report"); a hostile text must never take the process down.
		if r := recover(); r != nil {
			js, err = nil, fmt.Errorf("yaml: the parser failed: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return []byte("null"), nil
		}
		return nil, parserError(err, lim)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, fmt.Errorf("line %d: %w", next.Line, ErrSeveralDocuments)
	case !errors.Is(err, io.EOF):
		return nil, parserError(err, lim)
	}
	c := converter{ctx: ctx, lim: lim, out: make([]byte, 0, min(len(text)+16, lim.JSON+1))}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return []byte("null"), nil
		}
		root = root.Content[0]
	}
	if err := c.value(root, 0); err != nil {
		return nil, err
	}
	return c.out, nil
}

// parserError names the limit behind the parser's own depth bound (10,000 levels), beyond ours,
// and refuses an alias to an anchor that is not there as every alias is refused.
func parserError(err error, lim Limits) error {
	msg := err.Error()
	if strings.Contains(msg, "exceeded max depth") {
		return &LimitError{Kind: LimitDepth, Max: lim.Depth}
	}
	if _, rest, ok := strings.Cut(msg, "unknown anchor '"); ok {
		name, _, _ := strings.Cut(rest, "'")
		return fmt.Errorf("YAML alias *%s: anchors and aliases are %w"+expands, name, ErrRefused)
	}
	return err
}

type converter struct {
	ctx   context.Context
	lim   Limits
	nodes int
	out   []byte
}

// check refuses what no node may be, and counts the node.
func (c *converter) check(n *yaml.Node, depth int) error {
	c.nodes++
	if c.nodes > c.lim.Nodes {
		return &LimitError{Kind: LimitNodes, Max: c.lim.Nodes, Line: n.Line}
	}
	if c.nodes%checkEvery == 0 {
		if err := c.ctx.Err(); err != nil {
			return err
		}
	}
	switch {
	case n.Kind == yaml.AliasNode:
		return fmt.Errorf("line %d: YAML alias *%s: anchors and aliases are %w"+expands, n.Line, n.Value, ErrRefused)
	case n.Anchor != "":
		return fmt.Errorf("line %d: YAML anchor &%s: anchors and aliases are %w"+expands, n.Line, n.Anchor, ErrRefused)
	case n.Tag == "!!merge":
		return fmt.Errorf("line %d: YAML merge key <<: merge keys are %w"+expands, n.Line, ErrRefused)
	case n.Style&yaml.TaggedStyle != 0:
		if kind, ok := coreTags[n.Tag]; !ok || kind != n.Kind {
			return fmt.Errorf("line %d: YAML tag %s on a %s: tags beyond the core schema are %w"+typed, n.Line, n.Tag, kindName(n.Kind), ErrRefused)
		}
	}
	if (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && depth >= c.lim.Depth {
		return &LimitError{Kind: LimitDepth, Max: c.lim.Depth, Line: n.Line}
	}
	return nil
}

// value writes the JSON of a node nested in depth mappings and sequences.
func (c *converter) value(n *yaml.Node, depth int) error {
	if err := c.check(n, depth); err != nil {
		return err
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return c.scalar(n)
	case yaml.SequenceNode:
		c.out = append(c.out, '[')
		for i, item := range n.Content {
			if i > 0 {
				c.out = append(c.out, ',')
			}
			if err := c.value(item, depth+1); err != nil {
				return err
			}
		}
		c.out = append(c.out, ']')
	case yaml.MappingNode:
		if len(n.Content)%2 != 0 {
			return fmt.Errorf("line %d: a mapping with a key and no value", n.Line)
		}
		seen := make(map[string]struct{}, len(n.Content)/2)
		c.out = append(c.out, '{')
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if err := c.check(k, depth+1); err != nil {
				return err
			}
			key, err := keyString(k)
			if err != nil {
				return err
			}
			if _, dup := seen[key]; dup {
				return fmt.Errorf("line %d: mapping key %q already defined", k.Line, key)
			}
			seen[key] = struct{}{}
			if i > 0 {
				c.out = append(c.out, ',')
			}
			c.out = jsontree.AppendString(c.out, key)
			c.out = append(c.out, ':')
			if err := c.value(n.Content[i+1], depth+1); err != nil {
				return err
			}
		}
		c.out = append(c.out, '}')
	default:
		return fmt.Errorf("line %d: unexpected YAML %s", n.Line, kindName(n.Kind))
	}
	if len(c.out) > c.lim.JSON {
		return &LimitError{Kind: LimitJSON, Max: c.lim.JSON, Line: n.Line}
	}
	return nil
}

// scalar writes a scalar's JSON.
func (c *converter) scalar(n *yaml.Node) error {
	v, err := scalarValue(n)
	if err != nil {
		return err
	}
	switch t := v.(type) {
	case nil:
		c.out = append(c.out, "null"...)
	case string:
		c.out = jsontree.AppendString(c.out, t)
	case bool:
		c.out = strconv.AppendBool(c.out, t)
	case int64:
		c.out = strconv.AppendInt(c.out, t, 10)
	case uint64:
		c.out = strconv.AppendUint(c.out, t, 10)
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return fmt.Errorf("line %d: %s has no JSON form", n.Line, n.Value)
		}
		c.out = appendFloat(c.out, t)
	}
	if len(c.out) > c.lim.JSON {
		return &LimitError{Kind: LimitJSON, Max: c.lim.JSON, Line: n.Line}
	}
	return nil
}

// scalarValue resolves a scalar by its (resolved or explicit core) tag: nil, string, bool,
// int64, uint64 or float64.
func scalarValue(n *yaml.Node) (any, error) {
	switch n.Tag {
	case "!!str", "!!timestamp": // a date stays the text it is, as Kubernetes reads it
		return n.Value, nil
	case "!!null":
		if n.Style&yaml.TaggedStyle != 0 && n.Value != "" && n.Value != "~" && !strings.EqualFold(n.Value, "null") {
			return nil, fmt.Errorf("line %d: %q is not a !!null", n.Line, n.Value)
		}
		return nil, nil
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		switch t := v.(type) {
		case bool, uint64, float64:
			return t, nil
		case int:
			return int64(t), nil
		case int64:
			return t, nil
		case uint:
			return uint64(t), nil
		}
		return nil, fmt.Errorf("line %d: %q is not a %s", n.Line, n.Value, n.Tag)
	}
	return nil, fmt.Errorf("line %d: YAML tag %s: tags beyond the core schema are %w"+typed, n.Line, n.Tag, ErrRefused)
}

// keyString is the JSON name of a mapping key: a scalar's text, or the JSON of a non-string
// scalar (`1: x` and `true: x` are the names "1" and "true").
func keyString(k *yaml.Node) (string, error) {
	if k.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: a mapping key must be a string, not a %s", k.Line, kindName(k.Kind))
	}
	v, err := scalarValue(k)
	if err != nil {
		return "", err
	}
	switch t := v.(type) {
	case nil:
		return "null", nil
	case string:
		return t, nil
	case bool:
		return strconv.FormatBool(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case uint64:
		return strconv.FormatUint(t, 10), nil
	case float64:
		return string(appendFloat(nil, t)), nil
	}
	return "", fmt.Errorf("line %d: unexpected key %q", k.Line, k.Value)
}

// appendFloat writes a finite float as encoding/json does.
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.DocumentNode:
		return "document"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.MappingNode:
		return "mapping"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "node"
}
