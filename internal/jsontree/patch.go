package jsontree

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Diff writes the RFC 6902 operations that turn the original JSON (orig) into the
// patched tree (cur). Subtrees of cur still raw were never touched and are skipped without
// being read; decoded subtrees are compared with the original decoded to the same depth.
// Lists are compared item by item, appended items are added, and a list that got shorter is
// replaced whole.
func Diff(t *Tree, orig json.RawMessage, cur any) ([]byte, error) {
	if len(orig) == 0 {
		return nil, nil
	}
	w := &patchWriter{t: t}
	w.buf.WriteByte('[')
	if err := w.diff(orig, cur); err != nil {
		return nil, err
	}
	w.buf.WriteByte(']')
	return w.buf.Bytes(), nil
}

// patchWriter writes the operations. The path of the member being compared is built in path
// and the keys of the objects being walked are sorted in keys, both used as stacks, so that
// walking the decoded members costs no allocation per member.
type patchWriter struct {
	t       *Tree
	buf     bytes.Buffer
	scratch []byte
	path    []byte
	keys    []string
	n       int
}

func (w *patchWriter) op(op string, value any, withValue bool) error {
	if w.n > 0 {
		w.buf.WriteByte(',')
	}
	w.n++
	w.buf.WriteString(`{"op":"`)
	w.buf.WriteString(op)
	w.buf.WriteString(`","path":`)
	w.scratch = AppendString(w.scratch[:0], string(w.path))
	w.buf.Write(w.scratch)
	if withValue {
		w.buf.WriteString(`,"value":`)
		var err error
		if w.scratch, err = AppendJSON(w.scratch[:0], value); err != nil {
			return err
		}
		w.buf.Write(w.scratch)
	}
	w.buf.WriteByte('}')
	return nil
}

// sortedKeys appends to w.keys the keys of m for which f holds, sorted, and returns where they
// start; the caller truncates w.keys back to that once done with them.
func (w *patchWriter) sortedKeys(m map[string]any, f func(k string, v any) bool) int {
	from := len(w.keys)
	for k, v := range m {
		if f(k, v) {
			w.keys = append(w.keys, k)
		}
	}
	slices.Sort(w.keys[from:])
	return from
}

// diff compares a member of the original (a scalar, or raw JSON for objects and lists) with
// the patched tree at the path in w.path. A patched member still raw was never decoded, so it is
// the original: nothing is inserted raw, and lists are never reordered.
func (w *patchWriter) diff(orig, cur any) error {
	if IsRaw(cur) {
		return nil
	}
	at := len(w.path)
	defer func() { w.path = w.path[:at] }()
	switch c := cur.(type) {
	case map[string]any:
		o, ok := w.t.original(orig).(map[string]any)
		if !ok {
			return w.op("replace", cur, true)
		}
		// Operations are written in sorted key order, the same patch byte for byte every time;
		// only the keys that can produce one are sorted: removed ones, and members decoded or
		// set (a member still raw is the original, untouched).
		from := w.sortedKeys(o, func(k string, _ any) bool {
			_, kept := c[k]
			return !kept
		})
		for i := from; i < len(w.keys); i++ {
			w.path = appendPointer(append(w.path[:at], '/'), w.keys[i])
			if err := w.op("remove", nil, false); err != nil {
				return err
			}
		}
		w.keys = w.keys[:from]
		from = w.sortedKeys(c, func(_ string, v any) bool { return !IsRaw(v) })
		defer func() { w.keys = w.keys[:from] }()
		for i := from; i < len(w.keys); i++ {
			k := w.keys[i]
			w.path = appendPointer(append(w.path[:at], '/'), k)
			ov, had := o[k]
			if !had {
				if err := w.op("add", c[k], true); err != nil {
					return err
				}
				continue
			}
			if err := w.diff(ov, c[k]); err != nil {
				return err
			}
		}
		return nil
	case []any:
		o, ok := w.t.original(orig).([]any)
		if !ok || len(c) < len(o) {
			return w.op("replace", cur, true)
		}
		for i := range o {
			w.path = strconv.AppendInt(append(w.path[:at], '/'), int64(i), 10)
			if err := w.diff(o[i], c[i]); err != nil {
				return err
			}
		}
		w.path = append(w.path[:at], "/-"...)
		for _, item := range c[len(o):] {
			if err := w.op("add", item, true); err != nil {
				return err
			}
		}
		return nil
	default:
		if IsRaw(orig) || !scalarEqual(orig, cur) {
			return w.op("replace", cur, true)
		}
		return nil
	}
}

// scalarEqual is reflect.DeepEqual, without reflection for the scalars a decoded tree holds.
func scalarEqual(a, b any) bool {
	switch b.(type) {
	case string, json.Number, bool, nil:
		return a == b // a is a scalar too, or raw (never equal to a scalar)
	}
	return reflect.DeepEqual(a, b)
}

// IsRaw reports whether v is a member not decoded yet.
func IsRaw(v any) bool {
	_, ok := v.(json.RawMessage)
	return ok
}

// appendPointer appends a key escaped for a JSON pointer (RFC 6901).
func appendPointer(b []byte, k string) []byte {
	if !strings.ContainsAny(k, "~/") {
		return append(b, k...)
	}
	return append(b, strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")...)
}
