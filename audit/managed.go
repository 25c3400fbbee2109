package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/podpatch/podpatch/internal/objdiff"
	"github.com/podpatch/podpatch/internal/report"
)

// Who changed an enforced field after admission (reference §7, EnforceBroken), as the API
// server's field management recorded it in metadata.managedFields: the entry whose fieldsV1
// holds the field's path names the field manager, its operation (Update or Apply), the
// subresource and the time of that manager's last write.
//
// managedFields are the object's, and whoever may update the object may rewrite them (an
// empty entry strips them, any well-formed content is kept), so they are read as hostile
// input: at most MaxManagedEntries entries and MaxManagedBytes of them in all, fieldsV1 nested
// at most MaxFieldsDepth deep and holding at most MaxFieldsNodes members in all; beyond any
// bound, or malformed, what they say is not read and the field's writer is "unknown". What they
// say is what the API server recorded or what a writer of the object put there: evidence for
// a platform engineer, never an authority.
const (
	// MaxManagedEntries bounds the managedFields entries read (the API server keeps at most
	// ten Update managers and one entry per Apply manager).
	MaxManagedEntries = 64
	// MaxManagedBytes bounds the JSON of the managedFields read, all entries together.
	MaxManagedBytes = 512 << 10
	// MaxFieldsDepth bounds how deep a fieldsV1 nests (a Pod's deepest field is about 12).
	MaxFieldsDepth = 32
	// MaxFieldsNodes bounds the members of all fieldsV1 read, together (a Pod's managedFields
	// hold a few hundred per manager).
	MaxFieldsNodes = 1 << 14
)

// UnknownManager is the manager of a field managedFields say nothing about.
const UnknownManager = "unknown"

// Why a field's writer is unknown.
const (
	// UnknownRemoved: the field is gone from the object; managedFields own only fields that
	// are there.
	UnknownRemoved = "field removed: managedFields own only fields that are set"
	// UnknownNotOwned: the field is there, but no entry of managedFields owns it (stripped or
	// rewritten).
	UnknownNotOwned = "no managedFields entry owns the field"
	// UnknownUnreadable: managedFields are malformed or beyond the audit's bounds.
	UnknownUnreadable = "managedFields malformed or beyond bounds"
)

// FieldChange is who last wrote an enforced field that no longer holds its policy's value.
type FieldChange struct {
	// Field is the path, in `render --explain`'s form.
	Field string `json:"field"`
	// Manager is the field manager that owns the field now; UnknownManager when
	// managedFields do not say (Unknown says why).
	Manager string `json:"manager"`
	// Operation is the manager's operation: Update or Apply.
	Operation string `json:"operation,omitempty"`
	// Subresource is the subresource it wrote through, if any.
	Subresource string `json:"subresource,omitempty"`
	// Time is the time of that manager's last write (RFC 3339), as managedFields record it.
	Time string `json:"time,omitempty"`
	// Shared counts the other managers that own the field too (Apply managers that set the
	// same value); Manager is the one that wrote last.
	Shared int `json:"shared,omitempty"`
	// Unknown says why Manager is UnknownManager.
	Unknown string `json:"unknown,omitempty"`
}

// String is the change in a line: "FIELD by MANAGER (OPERATION, TIME)".
func (c FieldChange) String() string {
	if c.Unknown != "" { // not Manager: a field manager may be named "unknown"
		return fmt.Sprintf("%s by %s (%s)", c.Field, UnknownManager, c.Unknown)
	}
	var how []string
	if c.Operation != "" {
		how = append(how, c.Operation)
	}
	if c.Subresource != "" {
		how = append(how, "/"+c.Subresource)
	}
	if c.Time != "" {
		how = append(how, c.Time)
	}
	if c.Shared > 0 {
		how = append(how, fmt.Sprintf("shared with %d more", c.Shared))
	}
	if len(how) == 0 {
		return c.Field + " by " + c.Manager
	}
	return fmt.Sprintf("%s by %s (%s)", c.Field, c.Manager, strings.Join(how, ", "))
}

// managedEntry is one managedFields entry, its fieldsV1 read into a tree.
type managedEntry struct {
	manager, operation, subresource, time string
	when                                  time.Time
	fields                                *fieldSet
}

// fieldSet is a fieldsV1 node: its "f:" members by field name and its "k:" members (items of
// associative lists) with their keys. "v:", "i:" and "." members count as content only.
type fieldSet struct {
	fields map[string]*fieldSet
	keyed  []keyedItem
}

// keyedItem is a "k:" member: the item's key fields, each as canonical JSON.
type keyedItem struct {
	key map[string]string
	set *fieldSet
}

// errBounds is managedFields beyond the audit's bounds.
var errBounds = errors.New("managedFields beyond bounds")

// readManaged reads an object's managedFields, within the bounds. complete is false when some
// entry could not be read (malformed, beyond the bounds): a field none of the others owns is
// then unknown for that reason.
func readManaged(object []byte) (entries []managedEntry, complete bool) {
	var meta struct {
		Metadata struct {
			ManagedFields json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if json.Unmarshal(object, &meta) != nil {
		return nil, false
	}
	raw := meta.Metadata.ManagedFields
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, true
	}
	if len(raw) > MaxManagedBytes || nesting(raw) > MaxFieldsDepth+2 { // the list, an entry, its fieldsV1
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, false
	}
	complete = true
	budget := MaxFieldsNodes
	for dec.More() {
		if len(entries) == MaxManagedEntries {
			return entries, false
		}
		var e struct {
			Manager     string          `json:"manager"`
			Operation   string          `json:"operation"`
			Subresource string          `json:"subresource"`
			Time        string          `json:"time"`
			FieldsV1    json.RawMessage `json:"fieldsV1"`
		}
		if err := dec.Decode(&e); err != nil {
			return entries, false // the stream is broken: nothing after it can be read
		}
		fs, err := readFieldSet(e.FieldsV1, &budget)
		if err != nil {
			complete = false
			continue
		}
		me := managedEntry{manager: report.Clip(e.Manager, report.MaxString), operation: report.Clip(e.Operation, report.MaxString),
			subresource: report.Clip(e.Subresource, report.MaxString), fields: fs}
		if t, err := time.Parse(time.RFC3339, e.Time); err == nil {
			me.when, me.time = t, t.UTC().Format(time.RFC3339)
		}
		entries = append(entries, me)
	}
	return entries, complete
}

// nesting is how deep JSON nests (objects and lists), read in one pass that allocates nothing:
// what is too deep is refused before a decoder keeps a stack for it.
func nesting(raw []byte) int {
	depth, most, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > most {
				most = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return most
}

// maxObjectDepth is deeper than any field of a Pod or a Service nests: an object deeper than
// that holds its depth where the API server keeps JSON it does not validate, managedFields.
const maxObjectDepth = 64

// forEngine is the object the audit hands the engine and the comparison: as read, unless it
// nests deeper than maxObjectDepth; then without its managedFields (null), which no policy
// sets and whose depth would cost the explained apply and the comparison time in proportion
// to the square of their depth (every path is built from its parent's). managedFields are read
// on their own, bounded (readManaged).
func forEngine(object []byte) []byte {
	if nesting(object) <= maxObjectDepth {
		return object
	}
	if out, ok := withoutManagedFields(object); ok {
		return out
	}
	return object
}

// withoutManagedFields is the object with metadata.managedFields null, cut out of its bytes.
func withoutManagedFields(object []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(object))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	inMetadata := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		switch {
		case !inMetadata && key == "metadata":
			if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
				return nil, false
			}
			inMetadata = true
			continue
		case inMetadata && key == "managedFields":
			start := dec.InputOffset() // just after the key: the colon and the value follow
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil, false
			}
			end := dec.InputOffset()
			out := make([]byte, 0, len(object)-int(end-start)+len(":null"))
			out = append(out, object[:start]...)
			out = append(out, ":null"...)
			return append(out, object[end:]...), true
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return nil, false
		}
	}
	return nil, false
}

// leaf is the fieldSet of every member without members of its own ("f:name": {}), shared:
// it is never written.
var leaf = &fieldSet{}

// readFieldSet reads a fieldsV1 into a tree, spending budget (members), at most MaxFieldsDepth
// deep. Token by token: nothing deeper than the bound is ever held.
func readFieldSet(raw json.RawMessage, budget *int) (*fieldSet, error) {
	if len(raw) == 0 {
		return &fieldSet{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("fieldsV1 is not an object")
	}
	fs, err := readMembers(dec, 1, budget)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("fieldsV1: data after the object")
	}
	return fs, nil
}

// readMembers reads the members of a fieldsV1 object whose '{' was read, at depth.
func readMembers(dec *json.Decoder, depth int, budget *int) (*fieldSet, error) {
	if depth > MaxFieldsDepth {
		return nil, errBounds
	}
	var fs fieldSet // on the stack: a member without members is the shared leaf
	for dec.More() {
		if *budget--; *budget < 0 {
			return nil, errBounds
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("fieldsV1: member name is not a string")
		}
		if tok, err = dec.Token(); err != nil {
			return nil, err
		}
		if tok != json.Delim('{') {
			return nil, fmt.Errorf("fieldsV1: member %.40q is not an object", name)
		}
		child, err := readMembers(dec, depth+1, budget)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasPrefix(name, "f:"):
			if fs.fields == nil {
				fs.fields = map[string]*fieldSet{}
			}
			fs.fields[name[2:]] = child
		case strings.HasPrefix(name, "k:"):
			key, err := itemKey(name[2:])
			if err != nil {
				return nil, err
			}
			fs.keyed = append(fs.keyed, keyedItem{key: key, set: child})
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("fieldsV1: unterminated object")
	}
	if fs.fields == nil && fs.keyed == nil {
		return leaf, nil
	}
	out := new(fieldSet)
	*out = fs
	return out, nil
}

// itemKey reads a "k:" member's key, a flat JSON object, into canonical JSON values.
func itemKey(s string) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("fieldsV1: item key: %w", err)
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		c, err := canonical(v)
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

// canonical is a scalar JSON value as scalars encodes a live one: decoded (numbers as written)
// and encoded again, so that both sides escape alike.
func canonical(v json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return "", err
	}
	b, err := json.Marshal(x)
	return string(b), err
}

// step is one step of a field's path through the live object: a member by name, or an item
// of an associative list, given by its value there.
type step struct {
	member string
	// item is the canonical JSON of the item's scalar members, which hold its key.
	item map[string]string
}

// walkPath finds a field, in `render --explain`'s path form, in the live object, and returns the
// steps to it; ok is false when the object does not have it. The path form is ambiguous (keys
// may hold dots and brackets), so each step takes the longest key, or item name, of the object
// that the rest of the path starts with: the object decides, not the path.
func walkPath(obj any, path string) (steps []step, ok bool) {
	cur, rest := obj, path
	for rest != "" {
		switch v := cur.(type) {
		case map[string]any:
			best := ""
			for k := range v {
				if len(k) > len(best) && pathHasPrefix(rest, k) {
					best = k
				}
			}
			if best == "" {
				if _, ok := v[""]; !ok || !pathHasPrefix(rest, "") {
					return nil, false
				}
			}
			steps = append(steps, step{member: best})
			cur, rest = v[best], strings.TrimPrefix(rest[len(best):], ".")
		case []any:
			if rest[0] != '[' {
				return nil, false
			}
			byName := objdiff.ItemsByName(v)
			best, found := "", false
			for n := range byName {
				if (!found || len(n) > len(best)) && pathHasPrefix(rest[1:], n+"]") {
					best, found = n, true
				}
			}
			if !found {
				return nil, false
			}
			item := byName[best].(map[string]any)
			steps = append(steps, step{item: scalars(item)})
			cur, rest = item, strings.TrimPrefix(rest[len(best)+2:], ".")
		default:
			return nil, false
		}
	}
	return steps, true
}

// pathHasPrefix reports whether path is p or starts with p and then a member or an item.
func pathHasPrefix(path, p string) bool {
	if !strings.HasPrefix(path, p) {
		return false
	}
	r := path[len(p):]
	return r == "" || r[0] == '.' || r[0] == '['
}

// owns reports whether a fieldsV1 tree holds the field at steps (or anything inside it).
func (fs *fieldSet) owns(steps []step) bool {
	for _, s := range steps {
		if fs == nil {
			return false
		}
		if s.item == nil {
			fs = fs.fields[s.member]
			continue
		}
		var next *fieldSet
		for _, k := range fs.keyed {
			if k.matches(s.item) {
				next = k.set
				break
			}
		}
		fs = next
	}
	return fs != nil
}

// matches reports whether a live item (its scalars) has the key's values.
func (k keyedItem) matches(item map[string]string) bool {
	if len(k.key) == 0 {
		return false
	}
	for name, want := range k.key {
		if v, ok := item[name]; !ok || v != want {
			return false
		}
	}
	return true
}

// scalars are an item's scalar members as canonical JSON (json.Number as written), once per
// step, so that matching it against many keys encodes nothing.
func scalars(item map[string]any) map[string]string {
	out := make(map[string]string, len(item))
	for k, v := range item {
		switch v.(type) {
		case string, json.Number, bool, float64:
			if b, err := json.Marshal(v); err == nil {
				out[k] = string(b)
			}
		}
	}
	return out
}

// changedBy says, for each field, which manager managedFields say owns it now: the one that
// wrote last when several do; UnknownManager, and why, when they do not say. live is the
// object decoded with json.Number numbers.
func changedBy(live any, entries []managedEntry, complete bool, fields []string) []FieldChange {
	out := make([]FieldChange, 0, len(fields))
	for _, f := range fields {
		c := FieldChange{Field: f, Manager: UnknownManager}
		if live == nil {
			c.Unknown = UnknownUnreadable
			out = append(out, c)
			continue
		}
		steps, ok := walkPath(live, f)
		if !ok {
			c.Unknown = UnknownRemoved
			out = append(out, c)
			continue
		}
		owners := 0
		var last *managedEntry
		for i := range entries {
			e := &entries[i]
			if !e.fields.owns(steps) {
				continue
			}
			owners++
			if last == nil || !e.when.Before(last.when) {
				last = e
			}
		}
		switch {
		case last != nil:
			c = FieldChange{Field: f, Manager: last.manager, Operation: last.operation, Subresource: last.subresource, Time: last.time, Shared: owners - 1}
			if c.Manager == "" {
				c.Manager = `""`
			}
		case !complete:
			c.Unknown = UnknownUnreadable
		default:
			c.Unknown = UnknownNotOwned
		}
		out = append(out, c)
	}
	return out
}
