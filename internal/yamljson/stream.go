package yamljson

import (
	"bufio"
	"bytes"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Stream splits a multi-document YAML stream into documents, without parsing them: the
// parsing, bounded, is ToJSON's. A stream that starts with a flow collection may be a stream
// of JSON values instead: JSON hands it to the caller whole, and the documents are read from
// that text when it is no JSON after all.
type Stream struct {
	br   *bufio.Reader
	yaml *utilyaml.YAMLReader
}

// NewStream returns the documents of r. The caller bounds r's size.
func NewStream(r io.Reader) *Stream { return &Stream{br: bufio.NewReader(r)} }

// JSON reports whether the stream's first non-space byte opens a JSON object or array and, if
// so, reads the stream whole and returns its text. Call it before Next; Next then reads the
// documents of that text.
func (s *Stream) JSON() (text []byte, ok bool, err error) {
	if !startsWithCollection(s.br) {
		return nil, false, nil
	}
	if text, err = io.ReadAll(s.br); err != nil {
		return nil, true, err
	}
	s.br = bufio.NewReader(bytes.NewReader(text))
	return text, true, nil
}

// Document is one document of a Stream.
type Document struct {
	// Raw is the document as read, the `---` line that starts it included: what ToJSON reads.
	Raw []byte
	// Text is Raw without the `---` line that starts the stream's first document, so that
	// printing a document after the caller's own separator does not add an empty one.
	Text []byte
	// Blank tells a document that holds only blank lines, comments and the `---` line that
	// starts it: no value in it, told without a parser (TestBlankAgreesWithTheParser).
	Blank bool
}

// Next returns the next document, empty ones included, and io.EOF after the last one.
func (s *Stream) Next() (Document, error) {
	if s.yaml == nil {
		s.yaml = utilyaml.NewYAMLReader(s.br)
	}
	raw, err := s.yaml.Read()
	if err != nil {
		return Document{}, err
	}
	return Document{Raw: raw, Text: trimSeparator(raw), Blank: blank(raw)}, nil
}

// blank reports whether a document holds only blank lines, comments and the `---` line that
// starts it.
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
// document.
func trimSeparator(text []byte) []byte {
	if !bytes.HasPrefix(text, []byte("---")) {
		return text
	}
	if i := bytes.IndexByte(text, '\n'); i >= 0 {
		return text[i+1:]
	}
	return nil
}

// startsWithCollection peeks at the first non-space byte of the stream.
func startsWithCollection(br *bufio.Reader) bool {
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
