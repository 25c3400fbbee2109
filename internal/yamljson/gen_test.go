package yamljson_test

// A grammar of YAML with every hostile construct podpatch refuses — anchors, aliases, merge
// keys, custom tags — in every syntactic position (block and flow; after `:`, `,`, `[`, `{`,
// `?`, `-`; plain, quoted and JSON-style keys; tags; comments; several `---` documents), and
// the same characters where they are harmless (inside quoted strings and comments). The
// generator reads its choices from bytes, so the fuzzer explores the grammar, and it knows the
// value it wrote: an input without a hostile construct must convert to exactly that value.

import (
	"fmt"
	"strings"
)

// choices reads decisions from bytes; past their end every decision is 0, so every input ends.
type choices struct {
	b []byte
	i int
}

func (c *choices) pick(n int) int {
	if c.i >= len(c.b) || n <= 1 {
		c.i++
		return 0
	}
	v := int(c.b[c.i]) % n
	c.i++
	return v
}

func (c *choices) done() bool { return c.i >= len(c.b) }

// entry is one member of a generated mapping, in written order.
type entry struct {
	key string
	val any
}

// object is a generated mapping; list a generated sequence.
type (
	object []entry
	list   []any
)

// Hostile constructs the generator can place.
const (
	hostileNone = iota
	hostileAnchor
	hostileAlias
	hostileTag
	hostileMerge
	hostileKinds
)

// generator writes one YAML stream and remembers what it wrote.
type generator struct {
	c        *choices
	b        strings.Builder
	anchors  int // anchors defined so far in this document
	hostile  bool
	keySeq   int
	maxDepth int
	// force, when not hostileNone, places that construct at every position it can go.
	force int
}

// hostileChars are harmless inside quotes and comments, and must stay accepted there.
var hostileChars = []string{"&a", "*a", "<<", "!tag", "&", "*", "!!binary", ": *x", "{&a b}", "[*a]", "# ", "'", "\""}

func (g *generator) w(s string) { g.b.WriteString(s) }

// stream writes 1–3 documents separated by `---` lines, and returns their values.
func (g *generator) stream() []any {
	n := 1 + g.c.pick(3)
	var docs []any
	for d := range n {
		if d > 0 || g.c.pick(2) == 1 {
			switch g.c.pick(3) {
			case 0:
				g.w("---\n")
			case 1:
				g.w("--- # " + g.comment() + "\n")
			default:
				g.w("# " + g.comment() + "\n---\n")
			}
		}
		g.anchors = 0
		docs = append(docs, g.document())
	}
	return docs
}

// document writes a top-level mapping or sequence, in block or flow style.
func (g *generator) document() any {
	v := g.collection(0)
	if g.c.pick(3) == 0 {
		g.w(g.properties(v) + g.flow(v, 0) + "\n")
		return v
	}
	g.block(v, 0)
	return v
}

// collection generates a mapping or a sequence.
func (g *generator) collection(depth int) any {
	if g.c.pick(2) == 0 {
		return g.object(depth)
	}
	return g.list(depth)
}

func (g *generator) object(depth int) object {
	n := g.c.pick(4)
	if depth == 0 {
		n++
	}
	o := object{}
	for range n {
		g.keySeq++
		o = append(o, entry{key: fmt.Sprintf("k%d", g.keySeq), val: g.value(depth + 1)})
	}
	return o
}

func (g *generator) list(depth int) list {
	n := g.c.pick(4)
	if depth == 0 {
		n++
	}
	l := list{}
	for range n {
		l = append(l, g.value(depth+1))
	}
	return l
}

func (g *generator) value(depth int) any {
	if depth < g.maxDepth && !g.c.done() {
		switch g.c.pick(5) {
		case 0:
			return g.object(depth)
		case 1:
			return g.list(depth)
		}
	}
	switch g.c.pick(6) {
	case 0:
		return nil
	case 1:
		return g.c.pick(2) == 1
	case 2:
		return float64(g.c.pick(1000))
	case 3:
		return hostileChars[g.c.pick(len(hostileChars))] + "x"
	default:
		return fmt.Sprintf("s%d", g.c.pick(100))
	}
}

func (g *generator) comment() string {
	return "c " + hostileChars[g.c.pick(len(hostileChars))]
}

// hostileHere decides the construct at one position.
func (g *generator) hostileHere() int {
	if g.force != hostileNone {
		return g.force
	}
	if g.c.pick(6) != 0 {
		return hostileNone
	}
	return g.c.pick(hostileKinds)
}

// properties writes what goes before a node: an anchor, a tag (custom, or a core tag that
// matches the value), or nothing. Aliases and merge keys are placed by the callers.
func (g *generator) properties(v any) string {
	switch g.hostileHere() {
	case hostileAnchor:
		g.hostile = true
		g.anchors++
		return fmt.Sprintf("&a%d ", g.anchors)
	case hostileTag:
		g.hostile = true
		return []string{"!foo ", "!!binary ", "!<tag:example.com,2000:x> ", "!!set ", "!!timestamp ", "!!merge "}[g.c.pick(6)]
	}
	if g.c.pick(8) == 0 {
		switch v.(type) {
		case object:
			return "!!map "
		case list:
			return "!!seq "
		case string:
			return "!!str "
		case nil:
			return "!!null "
		}
	}
	return ""
}

// alias returns an alias to write instead of a node, or "" (an alias needs an anchor before it).
func (g *generator) alias() string {
	if g.anchors == 0 || g.hostileHere() != hostileAlias {
		return ""
	}
	g.hostile = true
	return fmt.Sprintf("*a%d", 1+g.c.pick(g.anchors))
}

// mergeKey returns a merge entry to write first in a mapping, or "".
func (g *generator) mergeKey(flow bool) string {
	if g.hostileHere() != hostileMerge {
		return ""
	}
	g.hostile = true
	target := "{m: 1}"
	if g.anchors > 0 && g.c.pick(2) == 0 {
		target = fmt.Sprintf("*a%d", 1+g.c.pick(g.anchors))
	}
	if flow {
		return "<<: " + target
	}
	return "<<: " + target
}

// scalar writes a scalar in one of its styles; block says whether a block scalar may be used.
func (g *generator) scalar(v any, indent int, block bool) string {
	switch t := v.(type) {
	case nil:
		return []string{"null", "~", "Null"}[g.c.pick(3)]
	case bool:
		return fmt.Sprint(t)
	case float64:
		return fmt.Sprint(int(t))
	case string:
		styles := 2
		if block {
			styles = 3
		}
		if !strings.HasPrefix(t, "s") || !isPlainSafe(t) {
			switch g.c.pick(styles) {
			case 1:
				return "'" + strings.ReplaceAll(t, "'", "''") + "'"
			case 2:
				return "|-\n" + strings.Repeat(" ", indent+2) + t
			default:
				return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(t) + `"`
			}
		}
		switch g.c.pick(4) {
		case 1:
			return `"` + t + `"`
		case 2:
			return "'" + t + "'"
		}
		return t
	}
	panic(fmt.Sprintf("generator: unexpected %T", v))
}

func isPlainSafe(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// key writes a mapping key: plain, quoted, with a core tag, or with an anchor or as an alias.
func (g *generator) key(k string) string {
	switch g.hostileHere() {
	case hostileAnchor:
		g.hostile = true
		g.anchors++
		return fmt.Sprintf("&a%d %s", g.anchors, k)
	case hostileAlias:
		if g.anchors > 0 {
			g.hostile = true
			return fmt.Sprintf("*a%d ", 1+g.c.pick(g.anchors)) // an alias key needs a space before its colon
		}
	}
	switch g.c.pick(4) {
	case 1:
		return `"` + k + `"`
	case 2:
		return "'" + k + "'"
	case 3:
		return "!!str " + k
	}
	return k
}

// flow writes a value inline. indent is the enclosing block's, for continuation lines.
func (g *generator) flow(v any, indent int) string {
	var b strings.Builder
	sep := func(i int) {
		if i == 0 {
			return
		}
		switch g.c.pick(4) {
		case 1:
			b.WriteString(",")
		case 2:
			b.WriteString(", # " + g.comment() + "\n" + strings.Repeat(" ", indent+2))
		default:
			b.WriteString(", ")
		}
	}
	switch t := v.(type) {
	case object:
		b.WriteString("{")
		i := 0
		if m := g.mergeKey(true); m != "" {
			b.WriteString(m)
			i++
		}
		for _, e := range t {
			sep(i)
			i++
			switch g.c.pick(4) {
			case 1: // JSON-style: a quoted key, no space after the colon (the flow-mapping alias bomb's shape)
				b.WriteString(`"` + e.key + `":`)
			case 2: // explicit key
				b.WriteString("? " + g.key(e.key) + " : ")
			default:
				b.WriteString(g.key(e.key) + ": ")
			}
			b.WriteString(g.flowNode(e.val, indent))
		}
		b.WriteString("}")
	case list:
		b.WriteString("[")
		for i, x := range t {
			sep(i)
			b.WriteString(g.flowNode(x, indent))
		}
		b.WriteString("]")
	default:
		return g.scalar(v, indent, false)
	}
	return b.String()
}

// flowNode writes a node in flow context with its properties, or an alias in its place.
func (g *generator) flowNode(v any, indent int) string {
	if a := g.alias(); a != "" {
		return a
	}
	return g.properties(v) + g.flow(v, indent)
}

// block writes a collection in block style at indent, the cursor at the start of a line.
func (g *generator) block(v any, indent int) {
	pad := strings.Repeat(" ", indent)
	switch t := v.(type) {
	case object:
		if len(t) == 0 {
			g.w(pad + "{}\n")
			return
		}
		if m := g.mergeKey(false); m != "" {
			g.w(pad + m + "\n")
		}
		for _, e := range t {
			if g.c.pick(5) == 0 {
				g.w(pad + "# " + g.comment() + "\n")
			}
			if g.c.pick(5) == 0 { // explicit key
				g.w(pad + "? " + g.key(e.key) + "\n" + pad + ":")
			} else {
				g.w(pad + g.key(e.key) + ":")
			}
			g.blockValue(e.val, indent)
		}
	case list:
		if len(t) == 0 {
			g.w(pad + "[]\n")
			return
		}
		for _, x := range t {
			g.w(pad + "-")
			g.blockValue(x, indent)
		}
	}
}

// blockValue writes a value after `key:` or `-`, then ends the line.
func (g *generator) blockValue(v any, indent int) {
	if a := g.alias(); a != "" {
		g.w(" " + a + "\n")
		return
	}
	props := g.properties(v)
	trail := ""
	if g.c.pick(4) == 0 {
		trail = " # " + g.comment()
	}
	switch t := v.(type) {
	case object, list:
		if g.c.pick(3) == 0 || isEmpty(t) {
			g.w(" " + props + g.flow(v, indent) + trail + "\n")
			return
		}
		g.w(" " + strings.TrimSuffix(props, " ") + trail + "\n")
		g.block(v, indent+2)
	default:
		s := g.scalar(v, indent, true)
		if strings.HasPrefix(s, "|") {
			trail = ""
		}
		g.w(" " + props + s + trail + "\n")
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case object:
		return len(t) == 0
	case list:
		return len(t) == 0
	}
	return false
}

// plain turns a generated value into what encoding/json decodes its JSON to.
func plain(v any) any {
	switch t := v.(type) {
	case object:
		m := map[string]any{}
		for _, e := range t {
			m[e.key] = plain(e.val)
		}
		return m
	case list:
		l := []any{}
		for _, x := range t {
			l = append(l, plain(x))
		}
		return l
	}
	return v
}

// generate writes a stream from fuzz bytes.
func generate(data []byte, force int) (text string, docs []any, hostile bool) {
	g := &generator{c: &choices{b: data}, maxDepth: 5, force: force}
	docs = g.stream()
	return g.b.String(), docs, g.hostile
}
