package yamljson

// The node bound is checked before go.yaml.in/yaml/v3 parses anything: the parser composes a
// document's whole tree, a few hundred bytes per node, before the converter can count a node
// (an 8 MiB flow list took a gigabyte). prescan reads the text once, in linear time
// and constant memory but for the block indentation stack, and counts only what surely makes a
// node, so that its count is a lower bound of the parser's: a text it refuses, the converter
// would refuse too (TestPrescanIsALowerBound, FuzzPrescan).

// prescanner holds the state of one scan.
type prescanner struct {
	text     []byte
	max      int
	maxDepth int
	deep     bool
	i        int
	line     int
	count    int
	// flow is the nesting of flow collections; 0 is block context.
	flow int
	// indents are the columns of the open block collections, as go-yaml's scanner keeps them
	// (roll_indent, unroll_indent). Only collections surely opened are pushed, so the top is
	// never above the scanner's: the regions skipped below (block scalars, plain continuation
	// lines) are never smaller than the parser's.
	indents []int
	// lineStart is where the current line starts.
	lineStart int
	// keyCol is the column of the first token since the last indicator in block context: where
	// a simple key starts if a `:` follows. -1 when none.
	keyCol int
	// plain is set inside a plain scalar.
	plain bool
	// tokPos is set where a token may start (after blanks and indicators).
	tokPos bool
	// levels are the open flow collections, innermost last.
	levels []level
	// comma is set after a flow `[`, `{` or `,` whose entry is not counted yet: a trailing
	// comma (`[a,]`) and an empty collection add no node.
	comma bool
	// explicitCol is the column of the last block `? `, whose value it counted, or -1.
	explicitCol int
	// keyCounted is set when the key of the simple key being read was counted (a flow
	// collection).
	keyCounted bool
	// item is set after an indicator that counted the node following it (a block `- `, `? `
	// or `:`, a flow `:`): a flow collection that is that node is not counted again.
	item bool
}

// level is an open flow collection.
type level struct {
	mapping bool
	// pair is set when the key and value of the current entry were counted (a single-pair
	// mapping in a sequence).
	pair bool
}

// prescan returns a lower bound of the nodes (keys, values, items; the document node not
// counted) go.yaml.in/yaml/v3 composes for text, and stops as soon as the count exceeds max,
// returning the line where it did. It counts, outside quoted scalars, comments and block
// scalars (skipped as go-yaml's scanner delimits them, from an indentation never above its):
//   - in flow context, each collection (`[`, `{`) and each entry its opener or a `,` promised,
//     once a token starts it (a trailing comma and `[]` promise none): one node in a sequence,
//     two (key and value) in a mapping, plus key and value at the `:` or `?` of a single-pair
//     mapping in a sequence (`[a: b]`);
//   - in block context, a flow collection that opens, each `- ` item (one node), each `? `
//     explicit key (key and value) and each `:` of a simple key (key and value; the value
//     alone after a counted key);
//   - a node an indicator counted is not counted again when it is a flow collection
//     (`- [a]`, `a: {b: c}`).
//
// Lines that may continue a multi-line plain scalar (`a: b\n  - c` is "b - c") are skipped,
// and so are a tag's `,`, `[` and `]`, which go-yaml reads into the tag.
//
// It also stops, with deep set, at a flow collection nested deeper than maxDepth: each is a
// node the converter refuses (the parser's own bound is 10,000 levels).
func prescan(text []byte, max, maxDepth int) (count, line int, deep bool) {
	text = normalizeBreaks(text)
	p := prescanner{text: text, max: max, maxDepth: maxDepth, line: 1, keyCol: -1, explicitCol: -1, tokPos: true}
	p.scan()
	return p.count, p.line, p.deep
}

// open enters a flow collection, whose first entry is promised.
func (p *prescanner) open(mapping bool) {
	if p.flow++; p.flow > p.maxDepth {
		p.deep = true
	}
	p.levels = append(p.levels, level{mapping: mapping})
	p.comma = true
}

// close leaves a flow collection.
func (p *prescanner) close() {
	if p.flow > 0 {
		p.flow--
		p.levels = p.levels[:len(p.levels)-1]
	}
}

func (p *prescanner) add() bool { return p.addN(1) }

func (p *prescanner) addN(n int) bool {
	p.count += n
	return p.count > p.max || p.deep
}

func (p *prescanner) top() int {
	if len(p.indents) == 0 {
		return -1
	}
	return p.indents[len(p.indents)-1]
}

func (p *prescanner) unroll(col int) {
	for len(p.indents) > 0 && p.indents[len(p.indents)-1] > col {
		p.indents = p.indents[:len(p.indents)-1]
	}
}

func (p *prescanner) roll(col int) {
	if col > p.top() {
		p.indents = append(p.indents, col)
	}
}

// blankAt reports whether position i is a space, a tab, a line break or the end.
func (p *prescanner) blankAt(i int) bool {
	if i < 0 || i >= len(p.text) {
		return true
	}
	switch p.text[i] {
	case ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

func flowIndicator(c byte) bool {
	switch c {
	case ',', '[', ']', '{', '}':
		return true
	}
	return false
}

// lineEnd returns the index of the line break ending the line at i, or len(text).
func (p *prescanner) lineEnd(i int) int {
	for i < len(p.text) && p.text[i] != '\n' {
		i++
	}
	return i
}

// nextLine moves to the start of the next line.
func (p *prescanner) nextLine() {
	p.i = p.lineEnd(p.i)
	if p.i < len(p.text) {
		p.i++
		p.line++
	}
	p.lineStart = p.i
}

// indentOf returns the spaces that start the line at i, and whether the line holds nothing
// but blanks.
func (p *prescanner) indentOf(i int) (col int, blank bool) {
	j := i
	for j < len(p.text) && p.text[j] == ' ' {
		j++
	}
	col = j - i
	for j < len(p.text) {
		switch p.text[j] {
		case ' ', '\t', '\r':
			j++
			continue
		case '\n':
			return col, true
		}
		return col, false
	}
	return col, true
}

func (p *prescanner) scan() {
	continuation := false // the last block line ended inside a plain scalar
	for p.i < len(p.text) {
		if p.flow > 0 {
			if p.content() {
				return
			}
			continuation = p.flow == 0 && p.plain
			continue
		}
		// A line in block context.
		col, blank := p.indentOf(p.i)
		if blank {
			p.nextLine()
			continue
		}
		if continuation && col > p.top() {
			p.nextLine() // a continuation of the plain scalar: `a: b\n  - c` is "b - c"
			continue
		}
		continuation = false
		p.i += col
		rest := p.text[p.i:]
		if col == 0 && len(rest) >= 3 && (string(rest[:3]) == "---" || string(rest[:3]) == "...") && p.blankAt(p.i+3) {
			p.indents = p.indents[:0]
			if rest[0] == '.' {
				p.nextLine()
				continue
			}
			p.i += 3
		} else if col == 0 && rest[0] == '%' {
			p.nextLine() // a directive
			continue
		}
		p.keyCol, p.keyCounted, p.plain, p.tokPos = -1, false, false, true
		if p.content() {
			return
		}
		continuation = p.flow == 0 && p.plain
	}
}

// content scans from p.i to the end of the current line (in flow context, the line break
// included), and reports whether the count went beyond max.
func (p *prescanner) content() bool {
	for p.i < len(p.text) {
		c := p.text[p.i]
		if c == '\n' {
			if p.flow == 0 {
				p.nextLine()
				return false
			}
			p.i++
			p.line++
			p.lineStart = p.i
			p.tokPos = true
			continue
		}
		if c == ' ' || c == '\t' || c == '\r' {
			if p.flow == 0 && !p.plain {
				p.tokPos = true
			} else if p.flow > 0 {
				p.tokPos = true
			}
			p.i++
			continue
		}
		if c == '#' && (p.tokPos || p.blankAt(p.i-1)) {
			p.plain = false
			p.i = p.lineEnd(p.i) // a comment
			continue
		}
		if p.flow > 0 {
			if p.flowChar(c) {
				return true
			}
			continue
		}
		stop, endLine := p.blockChar(c)
		if stop {
			return true
		}
		if endLine {
			return false
		}
	}
	return false
}

// entry counts the entry a flow `[`, `{` or `,` promised, now that a token starts it: one
// node in a sequence (the item, or the mapping of a single pair), two in a mapping (the key and
// its value, null when absent), whose key it counts.
func (p *prescanner) entry() bool {
	if !p.comma {
		return false
	}
	p.comma = false
	if p.levels[len(p.levels)-1].mapping {
		p.item = true
		return p.addN(2)
	}
	return p.addN(1)
}

// pairIndicator counts the key and the value of a single-pair mapping in a flow sequence
// (`[a: b]`, `[? a]`), once per entry, at its `?` or `:`; in a flow mapping the entry counted
// them. The value (after `:`) or key (after `?`) it counted follows.
func (p *prescanner) pairIndicator() bool {
	p.item = true
	if l := &p.levels[len(p.levels)-1]; !l.mapping && !l.pair {
		l.pair = true
		return p.addN(2)
	}
	return false
}

// flowChar scans one character in flow context.
func (p *prescanner) flowChar(c byte) bool {
	switch {
	case c == ']' || c == '}':
		p.comma, p.item = false, false // a trailing comma adds no entry
		p.close()
		p.plain, p.tokPos = false, true
		p.i++
		return false
	case c == ',':
		p.comma, p.item = true, false
		p.levels[len(p.levels)-1].pair = false
		p.plain, p.tokPos = false, true
		p.i++
		return false
	}
	if c == '[' || c == '{' {
		var stop bool
		switch {
		case p.comma: // the collection is the entry the comma promised
			stop = p.entry()
			p.item = false
		case p.item: // the collection is the value (or key) an indicator counted
			p.item = false
		default:
			stop = p.add()
		}
		p.open(c == '{')
		p.plain, p.tokPos = false, true
		p.i++
		return stop || p.deep
	}
	if !p.plain && p.tokPos && (c == '!' || c == '&' || c == '*') {
		p.property() // the node it belongs to follows
		return false
	}
	if p.entry() {
		return true
	}
	switch {
	case p.plain:
		p.i++
		if c == ':' && p.blankAt(p.i) { // go-yaml keeps `a:,` one plain scalar (scan_plain_scalar)
			p.plain, p.tokPos = false, true
			return p.pairIndicator()
		}
	case !p.tokPos:
		p.i++
	case c == ':' || c == '?':
		p.i++
		return p.pairIndicator()
	case c == '"' || c == '\'':
		p.item = false
		p.quoted(c)
	default:
		p.item = false
		p.plain, p.tokPos = true, false
		p.i++
	}
	return false
}

// blockChar scans one character in block context; endLine says the rest of the line was
// consumed (a block scalar).
func (p *prescanner) blockChar(c byte) (stop, endLine bool) {
	col := p.i - p.lineStart
	if p.plain || !p.tokPos {
		if c == ':' && p.blankAt(p.i+1) { // ends a simple key
			p.i++
			return p.simpleKey(), false
		}
		p.i++
		return false, false
	}
	p.unroll(col)
	switch {
	case c == ':' && p.blankAt(p.i+1) && p.keyCol >= 0: // after a quoted key, a flow collection or a property
		p.i++
		return p.simpleKey(), false
	case (c == '-' || c == '?' || c == ':') && p.blankAt(p.i+1):
		p.roll(col)
		p.keyCol, p.keyCounted, p.item = -1, false, true
		p.i++
		switch {
		case c == '?': // the key and its value, null when no `:` follows
			p.explicitCol = col
			return p.addN(2), false
		case c == ':' && col == p.explicitCol: // the value the `?` counted
			p.explicitCol = -1
			return false, false
		}
		return p.add(), false // the item; the value of an empty key
	case c == '|' || c == '>':
		p.item = false
		p.blockScalar()
		return false, true
	case c == '"' || c == '\'':
		if p.keyCol < 0 {
			p.keyCol = col
		}
		p.item = false
		p.quoted(c)
	case c == '[' || c == '{':
		first := p.keyCol < 0
		if first {
			p.keyCol = col
		}
		counted := p.item
		p.item = false
		p.open(c == '{')
		p.tokPos = true
		p.i++
		if counted {
			return p.deep, false
		}
		p.keyCounted = first
		return p.add(), false
	case c == '!' || c == '&' || c == '*':
		if p.keyCol < 0 {
			p.keyCol = col
		}
		p.property()
	default:
		if p.keyCol < 0 {
			p.keyCol = col
		}
		p.item = false
		p.plain, p.tokPos = true, false
		p.i++
	}
	return false, false
}

// simpleKey counts the key (unless a flow collection that was counted) and the value at the
// `:` of a simple key, and opens its mapping.
func (p *prescanner) simpleKey() bool {
	if p.keyCol >= 0 {
		p.roll(p.keyCol)
	}
	n := 2
	if p.keyCounted {
		n = 1
	}
	p.keyCol, p.keyCounted, p.plain, p.tokPos, p.item = -1, false, false, true, true
	return p.addN(n)
}

// property skips an anchor, an alias or a tag (scan_anchor, scan_tag).
func (p *prescanner) property() {
	tag := p.text[p.i] == '!' // go-yaml reads `,`, `[` and `]` into a tag, even in flow context
	for p.i < len(p.text) && !p.blankAt(p.i) && (tag || p.flow == 0 || !flowIndicator(p.text[p.i])) {
		p.i++
	}
	p.plain, p.tokPos = false, true
}

// quoted skips a quoted scalar, which may span lines: `”` in a single-quoted one and `\"`
// (any escape) in a double-quoted one do not end it.
func (p *prescanner) quoted(q byte) {
	p.i++
	for p.i < len(p.text) {
		switch c := p.text[p.i]; {
		case c == '\n':
			p.line++
			p.i++
			p.lineStart = p.i
			continue
		case q == '"' && c == '\\':
			if p.i+1 < len(p.text) && p.text[p.i+1] == '\n' {
				p.line++
				p.lineStart = p.i + 2
			}
			p.i += 2
			continue
		case c == q:
			if q == '\'' && p.i+1 < len(p.text) && p.text[p.i+1] == '\'' {
				p.i += 2
				continue
			}
			p.i++
			p.plain, p.tokPos = false, true
			return
		}
		p.i++
	}
	p.plain, p.tokPos = false, true
}

// blockScalar skips a block scalar from its indicator: the rest of the line, then the lines
// that are blank or indented at least as go-yaml's scanner requires (scan_block_scalar: the
// explicit indentation, else the first line's, at least one more than the enclosing
// collection's), computed from an indentation top never above the scanner's.
func (p *prescanner) blockScalar() {
	explicit := 0
	for j := p.i + 1; j < len(p.text) && j <= p.i+2; j++ {
		if c := p.text[j]; c >= '1' && c <= '9' {
			explicit = int(c - '0')
		}
	}
	top := p.top()
	p.nextLine()
	indent := 0
	if explicit > 0 {
		indent = explicit
		if top >= 0 {
			indent = top + explicit
		}
	} else {
		widest := 0
		for j := p.i; j < len(p.text); {
			col, blank := p.indentOf(j)
			if !blank {
				widest = max(widest, col)
				break
			}
			e := j
			for e < len(p.text) && p.text[e] == ' ' {
				e++
			}
			widest = max(widest, e-j)
			if j = p.lineEnd(j); j < len(p.text) {
				j++
			} else {
				break
			}
		}
		indent = max(widest, top+1, 1)
	}
	for p.i < len(p.text) {
		if col, blank := p.indentOf(p.i); !blank && col < indent {
			break
		}
		p.nextLine()
	}
	p.plain, p.tokPos, p.keyCol = false, true, -1
}

// normalizeBreaks returns text with every line break go-yaml's scanner reads (CR LF, a lone CR,
// NEL, LS and PS: its is_break) written as LF, the one break the prescanner knows, so that a
// comment, an indentation or a plain scalar ends where the parser's does: a lone CR after a
// comment would otherwise hide the next line from the parser's count and not from prescan's,
// and prescan would count more than the parser composes. text itself when it has none; else a
// copy, no longer than text.
func normalizeBreaks(text []byte) []byte {
	if !hasOtherBreak(text) {
		return text
	}
	out := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		switch n := otherBreak(text, i); {
		case n > 0:
			out = append(out, '\n')
			i += n - 1
		default:
			out = append(out, text[i])
		}
	}
	return out
}

// hasOtherBreak reports whether text holds a line break other than a lone LF.
func hasOtherBreak(text []byte) bool {
	for i, c := range text {
		if (c == '\r' || c == 0xC2 || c == 0xE2) && otherBreak(text, i) > 0 {
			return true
		}
	}
	return false
}

// otherBreak is the length of the line break other than a lone LF at text[i] (CR LF 2, CR 1,
// NEL 2, LS and PS 3), or 0.
func otherBreak(text []byte, i int) int {
	rest := text[i:]
	switch {
	case rest[0] == '\r' && len(rest) > 1 && rest[1] == '\n':
		return 2
	case rest[0] == '\r':
		return 1
	case len(rest) > 1 && rest[0] == 0xC2 && rest[1] == 0x85:
		return 2
	case len(rest) > 2 && rest[0] == 0xE2 && rest[1] == 0x80 && (rest[2] == 0xA8 || rest[2] == 0xA9):
		return 3
	}
	return 0
}
