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
	if err := w.diff(orig, cur, ""); err != nil {
		return nil, err
	}
	w.buf.WriteByte(']')
	return w.buf.Bytes(), nil
}

type patchWriter struct {
	t       *Tree
	buf     bytes.Buffer
	scratch []byte
	n       int
}

func (w *patchWriter) op(op, path string, value any, withValue bool) error {
	if w.n > 0 {
		w.buf.WriteByte(',')
	}
	w.n++
	w.buf.WriteString(`{"op":"`)
	w.buf.WriteString(op)
	w.buf.WriteString(`","path":`)
	w.scratch = AppendString(w.scratch[:0], path)
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

// diff compares a member of the original (a scalar, or raw JSON for objects and lists) with
// the patched tree at the same path. A patched member still raw was never decoded, so it is the
// original: nothing is inserted raw, and lists are never reordered.
func (w *patchWriter) diff(orig, cur any, path string) error {
	if IsRaw(cur) {
		return nil
	}
	switch c := cur.(type) {
	case map[string]any:
		o, ok := w.t.original(orig).(map[string]any)
		if !ok {
			return w.op("replace", path, cur, true)
		}
		// Operations are written in sorted key order, the same patch byte for byte every time;
		// only the keys that can produce one are sorted: removed ones, and members decoded or
		// set (a member still raw is the original, untouched).
		var keys []string
		for k := range o {
			if _, kept := c[k]; !kept {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := w.op("remove", path+"/"+escapePointer(k), nil, false); err != nil {
				return err
			}
		}
		keys = keys[:0]
		for k, v := range c {
			if !IsRaw(v) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := path + "/" + escapePointer(k)
			ov, had := o[k]
			if !had {
				if err := w.op("add", p, c[k], true); err != nil {
					return err
				}
				continue
			}
			if err := w.diff(ov, c[k], p); err != nil {
				return err
			}
		}
		return nil
	case []any:
		o, ok := w.t.original(orig).([]any)
		if !ok || len(c) < len(o) {
			return w.op("replace", path, cur, true)
		}
		for i := range o {
			if err := w.diff(o[i], c[i], path+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		for _, item := range c[len(o):] {
			if err := w.op("add", path+"/-", item, true); err != nil {
				return err
			}
		}
		return nil
	default:
		if IsRaw(orig) || !reflect.DeepEqual(orig, cur) {
			return w.op("replace", path, cur, true)
		}
		return nil
	}
}

// IsRaw reports whether v is a member not decoded yet.
func IsRaw(v any) bool {
	_, ok := v.(json.RawMessage)
	return ok
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
