package k8sfields

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestDivisorSupported checks the divisors the API server accepts for each kind of resource,
// with the resource named as a resourceFieldRef names it (limits.cpu, requests.memory, or bare).
func TestDivisorSupported(t *testing.T) {
	cases := []struct {
		res, divisor string
		want         bool
	}{
		{"limits.cpu", "1m", true},
		{"requests.cpu", "1", true},
		{"cpu", "1Mi", false},
		{"limits.memory", "1Mi", true},
		{"limits.memory", "1m", false},
		{"requests.ephemeral-storage", "1G", true},
		{"limits.hugepages-2Mi", "1Ki", true},
		{"limits.hugepages-2Mi", "2", false},
		{"limits.example.com/gpu", "7", true}, // not a resource with a divisor rule
		{"limits.cpu", "0", true},             // zero is unset: it defaults to 1
	}
	for _, tc := range cases {
		got := DivisorSupported(tc.res, resource.MustParse(tc.divisor))
		assert.Equal(t, tc.want, got, "%s divisor %s", tc.res, tc.divisor)
	}
}

// TestResourceOvercommitAllowed: native resources may request less than their limit; huge
// pages and extended resources may not.
func TestResourceOvercommitAllowed(t *testing.T) {
	for name, want := range map[string]bool{
		"cpu":                       true,
		"memory":                    true,
		"ephemeral-storage":         true,
		"kubernetes.io/something":   true,
		"hugepages-2Mi":             false,
		"example.com/gpu":           false,
		"nvidia.com/gpu":            false,
		"requests.example.com/card": false,
	} {
		assert.Equal(t, want, ResourceOvercommitAllowed(name), name)
	}
}

// TestEntryPointsOnlyCheckPresentFields: an empty partial spec has nothing to refuse, and one
// bad field gives exactly one error, at that field's path under the given root.
func TestEntryPointsOnlyCheckPresentFields(t *testing.T) {
	root := field.NewPath("template", "spec")
	assert.Empty(t, PodSpec(&corev1.PodSpec{}, root))
	assert.Empty(t, ServiceSpec(&corev1.ServiceSpec{}, field.NewPath("service", "spec")))
	assert.Empty(t, Labels(nil, root.Child("nodeSelector")))

	errs := PodSpec(&corev1.PodSpec{NodeSelector: map[string]string{"bad key!": "v"}}, root)
	if assert.Len(t, errs, 1) {
		assert.Equal(t, "template.spec.nodeSelector", errs[0].Field)
	}
	errs = ServiceSpec(&corev1.ServiceSpec{Type: "Bogus"}, field.NewPath("service", "spec"))
	if assert.Len(t, errs, 1) {
		assert.Equal(t, "service.spec.type", errs[0].Field)
		assert.Equal(t, field.ErrorTypeNotSupported, errs[0].Type)
	}
}
