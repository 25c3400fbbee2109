package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/podpatch/podpatch/internal/jsontree"
	"github.com/podpatch/podpatch/internal/yamljson"
)

// The parse stage's front end (doc.go): every YAML or JSON stream podpatch reads, the data keys
// of a ConfigMap and the files and objects of the tools alike, split into documents through one
// bounded converter (internal/yamljson) within the limits of limits.go.

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
// every YAML document goes through the one bounded front end (internal/yamljson).
// The caller bounds the stream's size.
func SplitDocuments(r io.Reader) ([]RawDocument, error) {
	chunks := maxStreamDocuments
	return splitDocuments(context.Background(), r, streamLimits, 0, &chunks)
}

// splitDocuments splits a stream into documents converted within lim, stopping after maxDocs
// non-empty ones when maxDocs > 0 (the caller reports the excess), and between documents once
// ctx is done. Each document, empty ones included, takes one of *chunks, which the caller may
// share between streams; none left is an error. Its errors carry the document's index (*documentError).
func splitDocuments(ctx context.Context, r io.Reader, lim yamljson.Limits, maxDocs int, chunks *int) ([]RawDocument, error) {
	stream := yamljson.NewStream(r)
	if text, ok, err := stream.JSON(); err != nil {
		return nil, err
	} else if ok {
		// A stream of JSON values (`kubectl get -o json`, jq), or YAML that starts with a flow
		// collection: JSON first, the YAML front end when it is no JSON.
		left := *chunks
		docs, err := splitJSON(ctx, text, maxDocs, chunks)
		if syntax := (*json.SyntaxError)(nil); !errors.As(err, &syntax) {
			return docs, err
		}
		*chunks = left
	}
	var docs []RawDocument
	for i := 1; maxDocs <= 0 || len(docs) < maxDocs; i++ {
		doc, err := stream.Next()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err == nil {
			err = ctx.Err()
		}
		if *chunks--; err == nil && *chunks < 0 {
			err = fmt.Errorf("%w: more than %d documents, empty ones included", ErrTooLarge, maxStreamDocuments)
		}
		if err != nil {
			return nil, &documentError{Index: i, Err: err}
		}
		if doc.Blank {
			continue // nothing to parse: a parser costs kilobytes, a `---` line four bytes
		}
		js, err := yamljson.ToJSON(ctx, doc.Raw, lim)
		if err != nil {
			return nil, &documentError{Index: i, Err: limitError(err)}
		}
		if string(js) == "null" {
			continue
		}
		docs = append(docs, RawDocument{JSON: js, Text: doc.Text, Index: i})
	}
	return docs, nil
}

// documentError is an error about one document of a stream.
type documentError struct {
	// Index is the document's position in the stream, from 1, counting empty ones.
	Index int
	Err   error
}

func (e *documentError) Error() string { return fmt.Sprintf("document %d: %v", e.Index, e.Err) }

// Unwrap returns the document's error.
func (e *documentError) Unwrap() error { return e.Err }

// The front end's limits for each kind of input (reference §3 "Limits").
var (
	// streamLimits bound one document of a file or stdin: an object of render, a ConfigMap.
	streamLimits = yamljson.Limits{Text: MaxFileBytes, Depth: maxDepth, Nodes: MaxYAMLNodes, JSON: MaxFileBytes}
	// policyLimits bound one policy document of a ConfigMap's data.
	policyLimits = yamljson.Limits{Text: MaxPolicyTextBytes, Depth: maxDepth, Nodes: MaxYAMLNodes, JSON: maxPolicyBytes}
)

// splitJSON splits a stream of JSON values into documents, as splitDocuments does a YAML
// stream; its syntax errors are *json.SyntaxError.
func splitJSON(ctx context.Context, text []byte, maxDocs int, chunks *int) ([]RawDocument, error) {
	values := jsontree.NewValues(text)
	var docs []RawDocument
	for i := 1; maxDocs <= 0 || len(docs) < maxDocs; i++ {
		raw, err := values.Next()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if errors.Is(err, jsontree.ErrDecoderDepth) { // the decoder's own bound, beyond ours
			err = fmt.Errorf("%w: nested deeper than %d levels", ErrTooLarge, maxDepth)
		}
		if err == nil {
			err = ctx.Err()
		}
		if *chunks--; err == nil && *chunks < 0 {
			err = fmt.Errorf("%w: more than %d documents", ErrTooLarge, maxStreamDocuments)
		}
		if err == nil {
			err = checkJSONDepth(raw)
		}
		if err == nil {
			err = checkJSONNodes(raw)
		}
		if err == nil {
			err = jsontree.CheckDuplicateKeys(raw)
		}
		if err != nil {
			return nil, &documentError{Index: i, Err: err}
		}
		docs = append(docs, RawDocument{JSON: raw, Text: raw, Index: i})
	}
	return docs, nil
}
