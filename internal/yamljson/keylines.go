package yamljson

import (
	"go.yaml.in/yaml/v3"
)

// KeyLine is where a mapping key stands in a YAML document: its line (from 1), and whether its
// value is a literal or folded block scalar (`|`, `>`), whose line n of text stands at line
// Line+n.
type KeyLine struct {
	Line  int
	Block bool
}

// KeyLines finds the keys of the mapping at path (mapping keys from the document's root) in
// one YAML document: where a ConfigMap's data keys stand, so that an error inside a key's text
// can be given the file's line. It is meant for a document ToJSON has already accepted (within
// its bounds, no aliases); it returns nil for anything else.
func KeyLines(text []byte, path ...string) map[string]KeyLine {
	var doc yaml.Node
	if yaml.Unmarshal(text, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil
	}
	n := doc.Content[0]
	for _, key := range path {
		n = member(n, key)
		if n == nil {
			return nil
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	out := make(map[string]KeyLine, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if _, dup := out[k.Value]; !dup {
			out[k.Value] = KeyLine{Line: k.Line, Block: v.Kind == yaml.ScalarNode && v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0}
		}
	}
	return out
}

// member is the value of a mapping's key, or nil.
func member(n *yaml.Node, key string) *yaml.Node {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
