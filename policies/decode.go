package policies

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
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

// SplitDocuments reads a multi-document YAML stream or a stream of JSON values. Documents that
// hold nothing (only comments or whitespace) are dropped. Duplicate keys are errors, and so are
// YAML anchors and aliases and nesting beyond MaxDepth (limits.go). The caller bounds the
// stream's size.
func SplitDocuments(r io.Reader) ([]RawDocument, error) {
	br := bufio.NewReader(r)
	if isJSON(br) {
		return splitJSON(br)
	}
	reader := utilyaml.NewYAMLReader(br)
	var docs []RawDocument
	for i := 1; ; i++ {
		text, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if err := checkYAML(text); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSONStrict(text)
		if err != nil && strings.Contains(err.Error(), "exceeded max depth") { // the parser's own bound, beyond ours
			err = fmt.Errorf("%w: nested deeper than %d levels", ErrTooLarge, MaxDepth)
		}
		if err == nil {
			err = checkJSONDepth(js)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		docs = append(docs, RawDocument{JSON: js, Text: trimSeparator(text), Index: i})
	}
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

func splitJSON(r io.Reader) ([]RawDocument, error) {
	dec := json.NewDecoder(r)
	var docs []RawDocument
	for i := 1; ; i++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil && strings.Contains(err.Error(), "exceeded max depth") { // the decoder's own bound, beyond ours
			err = fmt.Errorf("%w: nested deeper than %d levels", ErrTooLarge, MaxDepth)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if err := checkJSONDepth(raw); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if err := checkDuplicateKeys(raw); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		docs = append(docs, RawDocument{JSON: raw, Text: raw, Index: i})
	}
}

// checkDuplicateKeys rejects JSON objects that repeat a key, as YAMLToJSONStrict does for YAML.
func checkDuplicateKeys(raw []byte) error {
	_, err := yaml.YAMLToJSONStrict(raw)
	return err
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
