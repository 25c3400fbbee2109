package typecheck

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podpatch/podpatch/policies/profiles"
)

// TestTypes: every value of the wrong type is reported at its path and taken out, the others
// stay; the engine's own types are named as policies.<Name>.
func TestTypes(t *testing.T) {
	type doc struct {
		Priority int32              `json:"priority"`
		Managers []profiles.Manager `json:"managers"`
		Labels   map[string]string  `json:"labels"`
		Spec     corev1.PodSpec     `json:"spec"`
	}
	tree := map[string]any{
		"priority": json.Number("99999999999"),
		"managers": []any{"ray", json.Number("5")},
		"labels":   map[string]any{"a": "b", "c": []any{"d"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": json.Number("5")}}, "unknown": true},
	}
	var got []string
	for _, e := range Types(tree, reflect.TypeFor[doc](), nil) {
		got = append(got, e.Error())
	}
	require.Equal(t, []string{
		`labels[c]: Invalid value: a list of 1 item(s): wrong type: want string`,
		`managers[1]: Invalid value: 5: wrong type: want policies.Manager`,
		`priority: Invalid value: 99999999999: wrong type: want int32`,
		`spec.containers[0].name: Invalid value: 5: wrong type: want string`,
	}, got)
	require.Equal(t, map[string]any{
		"managers": []any{"ray", nil},
		"labels":   map[string]any{"a": "b"},
		"spec":     map[string]any{"containers": []any{map[string]any{}}, "unknown": true},
	}, tree)
}

// TestQuantities: a bad quantity is reported and becomes "0", a null one is dropped.
func TestQuantities(t *testing.T) {
	tree := map[string]any{"resources": map[string]any{
		"limits":   map[string]any{"cpu": "lots", "memory": "1Gi", "nvidia.com/gpu": nil},
		"requests": map[string]any{"cpu": json.Number("1")},
	}}
	errs := Quantities(tree)
	require.Len(t, errs, 1)
	require.Equal(t, `resources.limits[cpu]: Invalid value: "lots": not a valid resource quantity (e.g. 500m, 2Gi, 1)`, errs[0].Error())
	require.Equal(t, map[string]any{"resources": map[string]any{
		"limits":   map[string]any{"cpu": "0", "memory": "1Gi"},
		"requests": map[string]any{"cpu": json.Number("1")},
	}}, tree)
}
