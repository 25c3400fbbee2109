package jsontree

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrDecoderDepth is the error of Values.Next for a value nested beyond encoding/json's own
// bound, which lies beyond the caller's (the caller reports its own limit).
var ErrDecoderDepth = errors.New("nested beyond the decoder's depth bound")

// Decode decodes one JSON value into generic form, keeping numbers exactly as written
// (json.Number) so that re-encoding never rewrites a quantity or an integer.
func Decode(raw []byte) (any, error) {
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

// DecodeObject decodes one JSON object as Decode does; any other value is an error naming
// what it is (TypeName).
func DecodeObject(raw []byte) (map[string]any, error) {
	v, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected a JSON object, got %s", TypeName(v))
	}
	return obj, nil
}

// TypeName says what a decoded JSON value is, for a message ("an object", "a list", "a
// string", …).
func TypeName(v any) string {
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

// Values splits a stream of JSON values (`kubectl get -o json`, jq) one value at a time.
type Values struct{ dec *json.Decoder }

// NewValues returns the values of text.
func NewValues(text []byte) *Values { return &Values{dec: json.NewDecoder(bytes.NewReader(text))} }

// Next returns the next value as written, io.EOF after the last one. Its syntax errors are
// *json.SyntaxError; a value nested beyond encoding/json's bound is ErrDecoderDepth.
func (v *Values) Next() (json.RawMessage, error) {
	var raw json.RawMessage
	err := v.dec.Decode(&raw)
	if err != nil && strings.Contains(err.Error(), "exceeded max depth") {
		return nil, fmt.Errorf("%w: %w", ErrDecoderDepth, err)
	}
	return raw, err
}

// CheckDuplicateKeys rejects JSON objects that repeat a key, as the YAML front end does. The
// JSON is valid and its depth checked (CheckDepth); the walk keeps one key set per open object.
func CheckDuplicateKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // a number beyond float64 (1e400) is valid JSON, not an error here
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
