package policies

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/podpatch/podpatch/policies/internal/yamljson"
)

// decodeJSON decodes one JSON value into generic form, keeping numbers exactly as written
// (json.Number) so that re-encoding never rewrites a quantity or an integer.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// decodeObject decodes a JSON object.
func decodeObject(raw []byte) (map[string]any, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected a JSON object, got %s", typeName(v))
	}
	return obj, nil
}

// RawDocument is one document of a YAML or JSON stream: its JSON form and the exact text it
// was read from, so that untouched objects can be printed as they came in.
type RawDocument struct {
	// JSON is the document converted to JSON.
	JSON []byte
	// Text is the document exactly as it appeared in the stream.
	Text []byte
	// Index is the position of the document in the stream, from 1, counting empty ones.
	Index int
}

// SplitDocuments reads a multi-document YAML stream or a stream of JSON values: the objects of
// `render -f` and the ConfigMap files of lint, render and --policy-dir. Documents that hold
// nothing (only comments or whitespace) are dropped. Duplicate keys are errors, and so are
// YAML anchors, aliases, merge keys and custom tags, and input beyond the limits of limits.go:
// every YAML document goes through the one bounded front end (policies/internal/yamljson).
// The caller bounds the stream's size.
func SplitDocuments(r io.Reader) ([]RawDocument, error) {
	chunks := MaxStreamDocuments
	return splitDocuments(context.Background(), r, streamLimits, 0, &chunks)
}

// splitDocuments splits a stream into documents converted within lim, stopping after maxDocs
// non-empty ones when maxDocs > 0 (the caller reports the excess), and between documents once
// ctx is done. Each document, empty ones included, takes one of *chunks, which the caller may
// share between streams; none left is an error. Its errors carry the document's index (*DocumentError).
func splitDocuments(ctx context.Context, r io.Reader, lim yamljson.Limits, maxDocs int, chunks *int) ([]RawDocument, error) {
	br := bufio.NewReader(r)
	if isJSON(br) {
		// A stream of JSON values (`kubectl get -o json`, jq), or YAML that starts with a flow
		// collection: JSON first, the YAML front end when it is no JSON.
		text, err := io.ReadAll(br)
		if err != nil {
			return nil, err
		}
		left := *chunks
		docs, err := splitJSON(ctx, bytes.NewReader(text), maxDocs, chunks)
		if syntax := (*json.SyntaxError)(nil); !errors.As(err, &syntax) {
			return docs, err
		}
		br, *chunks = bufio.NewReader(bytes.NewReader(text)), left
	}
	reader := utilyaml.NewYAMLReader(br)
	var docs []RawDocument
	for i := 1; maxDocs <= 0 || len(docs) < maxDocs; i++ {
		text, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err == nil {
			err = ctx.Err()
		}
		if *chunks--; err == nil && *chunks < 0 {
			err = fmt.Errorf("%w: more than %d documents, empty ones included", ErrTooLarge, MaxStreamDocuments)
		}
		if err != nil {
			return nil, &DocumentError{Index: i, Err: err}
		}
		if blank(text) {
			continue // nothing to parse: a parser costs kilobytes, a `---` line four bytes
		}
		js, err := yamljson.ToJSON(ctx, text, lim)
		if err != nil {
			return nil, &DocumentError{Index: i, Err: limitError(err)}
		}
		if bytes.Equal(js, []byte("null")) {
			continue
		}
		docs = append(docs, RawDocument{JSON: js, Text: trimSeparator(text), Index: i})
	}
	return docs, nil
}

// DocumentError is an error about one document of a stream.
type DocumentError struct {
	// Index is the document's position in the stream, from 1, counting empty ones.
	Index int
	Err   error
}

func (e *DocumentError) Error() string { return fmt.Sprintf("document %d: %v", e.Index, e.Err) }

// Unwrap returns the document's error.
func (e *DocumentError) Unwrap() error { return e.Err }

// The front end's limits for each kind of input (reference §3 "Limits").
var (
	// streamLimits bound one document of a file or stdin: an object of render, a ConfigMap.
	streamLimits = yamljson.Limits{Text: MaxFileBytes, Depth: MaxDepth, Nodes: MaxYAMLNodes, JSON: MaxFileBytes}
	// policyLimits bound one policy document of a ConfigMap's data.
	policyLimits = yamljson.Limits{Text: MaxPolicyTextBytes, Depth: MaxDepth, Nodes: MaxYAMLNodes, JSON: MaxPolicyBytes}
)

// limitError makes the front end's limit errors wrap ErrTooLarge.
func limitError(err error) error {
	if le := (*yamljson.LimitError)(nil); errors.As(err, &le) {
		return fmt.Errorf("%w: %w", ErrTooLarge, le)
	}
	return err
}

// blank reports whether a document holds only blank lines, comments and the `---` line that
// starts it: a document with no value in it, told without a parser (TestBlankAgreesWithTheParser).
func blank(text []byte) bool {
	for n := 0; len(text) > 0; n++ {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimRight(line, "\r")
		if n == 0 && bytes.HasPrefix(line, []byte("---")) && (len(line) == 3 || line[3] == ' ' || line[3] == '\t') {
			line = line[3:] // the marker at column 0; a comment may follow
		}
		if line = bytes.TrimLeft(line, " \t"); len(line) > 0 && line[0] != '#' {
			return false
		}
	}
	return true
}

// trimSeparator drops the `---` line the YAML reader leaves at the start of a stream's first
// document, so that printing a document after our own separator does not add an empty one.
func trimSeparator(text []byte) []byte {
	if !bytes.HasPrefix(text, []byte("---")) {
		return text
	}
	if i := bytes.IndexByte(text, '\n'); i >= 0 {
		return text[i+1:]
	}
	return nil
}

// isJSON peeks at the first non-space byte of the stream.
func isJSON(br *bufio.Reader) bool {
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if err != nil || len(b) < n {
			return false
		}
		switch c := b[n-1]; c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return true
		default:
			return false
		}
	}
}

func splitJSON(ctx context.Context, r io.Reader, maxDocs int, chunks *int) ([]RawDocument, error) {
	dec := json.NewDecoder(r)
	var docs []RawDocument
	for i := 1; maxDocs <= 0 || len(docs) < maxDocs; i++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil && strings.Contains(err.Error(), "exceeded max depth") { // the decoder's own bound, beyond ours
			err = fmt.Errorf("%w: nested deeper than %d levels", ErrTooLarge, MaxDepth)
		}
		if err == nil {
			err = ctx.Err()
		}
		if *chunks--; err == nil && *chunks < 0 {
			err = fmt.Errorf("%w: more than %d documents", ErrTooLarge, MaxStreamDocuments)
		}
		if err == nil {
			err = checkJSONDepth(raw)
		}
		if err == nil {
			err = checkDuplicateKeys(raw)
		}
		if err != nil {
			return nil, &DocumentError{Index: i, Err: err}
		}
		docs = append(docs, RawDocument{JSON: raw, Text: raw, Index: i})
	}
	return docs, nil
}

// checkDuplicateKeys rejects JSON objects that repeat a key, as the YAML front end does. The
// JSON is valid and its depth checked; the walk keeps one key set per open object.
func checkDuplicateKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		keys     map[string]struct{}
		isObject bool
		wantKey  bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, frame{keys: map[string]struct{}{}, isObject: true, wantKey: true})
				continue
			case '[':
				stack = append(stack, frame{})
				continue
			default:
				stack = stack[:top]
				if top > 0 && stack[top-1].isObject {
					stack[top-1].wantKey = true
				}
				continue
			}
		}
		if top < 0 || !stack[top].isObject {
			continue
		}
		if f := &stack[top]; f.wantKey {
			k, _ := tok.(string)
			if _, dup := f.keys[k]; dup {
				return fmt.Errorf("key %q already set in map", k)
			}
			f.keys[k] = struct{}{}
			f.wantKey = false
		} else {
			f.wantKey = true
		}
	}
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}
