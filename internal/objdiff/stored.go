package objdiff

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Compare lists where two objects of a kind ("Pod", "Service") differ, with the value each has
// there, as the audit compares them (reference §7): both in the API server's encoding
// (Canonical: `1000m` is `1`, zero values of omitempty fields dropped), the annotation ignore
// left out (the provenance annotation, which says how an object was patched, not what it is),
// compared AsStored. `podpatch diff` (reference §10) shows its result as old → new.
func Compare(kind string, before, after []byte, ignore string) ([]Change, error) {
	b, err := Canonical(kind, before)
	if err != nil {
		return nil, err
	}
	a, err := Canonical(kind, after)
	if err != nil {
		return nil, err
	}
	dropAnnotation(b, ignore)
	dropAnnotation(a, ignore)
	return Changes(b, a, AsStored), nil
}

// Canonical is an object of a kind ("Pod", "Service") as the API server would store it, as far
// as encoding goes: through the Go type, which drops the zero values of omitempty fields (a
// policy's `hostNetwork: false`) but keeps those of pointers (`allowPrivilegeEscalation: false`
// is not unset), and writes quantities canonically (`1000m` is `1`). Fields this build does not
// know are left out of the comparison. An object the type cannot hold, or of another kind, is
// compared as it is. Numbers are json.Number.
func Canonical(kind string, b []byte) (any, error) {
	var typed any
	switch kind {
	case "Pod":
		typed = &corev1.Pod{}
	case "Service":
		typed = &corev1.Service{}
	}
	if typed != nil && json.Unmarshal(b, typed) == nil {
		if out, err := json.Marshal(typed); err == nil {
			b = out
		}
	}
	return decode(b)
}

// decode reads JSON into a generic tree, numbers as json.Number: the trees Paths and Changes
// compare by value.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return v, nil
}

// dropAnnotation removes an annotation from a decoded object, and the annotations with it when
// it was the only one, as the API server stores an empty map.
func dropAnnotation(obj any, key string) {
	m, _ := obj.(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	if ann, ok := meta["annotations"].(map[string]any); ok {
		if delete(ann, key); len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
}
