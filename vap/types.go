package vap

import (
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Whether the API server stores a field's zero value: a pointer field keeps `false` (a
// container's allowPrivilegeEscalation), a plain omitempty field drops it (a Pod's hostNetwork),
// so that a zero value enforced there reads as absent. Read from the Go types the API server
// decodes into.

var (
	podType         = reflect.TypeFor[corev1.Pod]()
	serviceType     = reflect.TypeFor[corev1.Service]()
	containerType   = reflect.TypeFor[corev1.Container]()
	volumeMountType = reflect.TypeFor[corev1.VolumeMount]()
)

// dropsZero reports whether the field at path (JSON names) under t is a plain omitempty field,
// whose zero value the API server does not store. Unknown paths: false (the check then wants the
// value present).
func dropsZero(t reflect.Type, path []string) bool {
	var f reflect.StructField
	for _, name := range path {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return false
		}
		found := false
		for i := range t.NumField() {
			sf := t.Field(i)
			if tag := strings.Split(sf.Tag.Get("json"), ","); tag[0] == name {
				f, found = sf, true
				break
			}
		}
		if !found {
			return false
		}
		t = f.Type
	}
	return t.Kind() != reflect.Pointer && strings.Contains(f.Tag.Get("json"), ",omitempty")
}
