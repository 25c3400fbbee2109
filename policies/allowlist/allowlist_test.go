package allowlist

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestCheck: the allow-list is about the effect of a part, path by path (reference §3).
func TestCheck(t *testing.T) {
	allowed, err := ParseFields(DefaultFields)
	require.NoError(t, err)
	keyed := func(list string) bool { return list == "containers" || list == "env" || list == "tolerations" }
	for _, c := range []struct {
		name    string
		part    map[string]any
		service bool
		want    []string // the paths refused
	}{
		{name: "allowed leaf", part: map[string]any{"spec": map[string]any{"priorityClassName": "high"}}},
		{name: "allowed under a keyed list", part: map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "worker", "resources": map[string]any{"limits": map[string]any{"cpu": "1"}}}}}}},
		{name: "outside", part: map[string]any{"spec": map[string]any{"hostNetwork": true}}, want: []string{"spec.template.spec.hostNetwork"}},
		{name: "a null on the way", part: map[string]any{"spec": nil}, want: []string{"spec.template.spec"}},
		{name: "a list replaced whole", part: map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "worker", "volumeMounts": []any{}}}}}, want: []string{"spec.template.spec.containers[0].volumeMounts"}},
		{name: "a secret under an allowed parent", part: map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "worker", "env": []any{map[string]any{"name": "X", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "s", "key": "k"}}}}}}}},
			want: []string{"spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef"}},
		{name: "service entries", service: true, part: map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b"}}, "spec": map[string]any{"type": "LoadBalancer"}},
			want: []string{"spec.service.spec"}},
	} {
		at := field.NewPath("spec", "template")
		if c.service {
			at = field.NewPath("spec", "service")
		}
		var got []string
		for _, e := range allowed.Check(c.part, c.service, keyed, at) {
			require.Equal(t, field.ErrorTypeForbidden, e.Type, c.name)
			got = append(got, e.Field)
		}
		require.Equal(t, c.want, got, c.name)
	}
}

// TestDeniedCheck: a denied annotation set or removed is refused, and so is a null that removes
// every annotation; an exception is not.
func TestDeniedCheck(t *testing.T) {
	var d DeniedAnnotations // the default list
	at := field.NewPath("spec", "service")
	errs := d.Check(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		"service.beta.kubernetes.io/aws-load-balancer-internal": "true",
		"podpatch.io/provide-external-url":                      "true",
		"team":                                                  "a",
	}}}, at)
	require.Len(t, errs, 1)
	require.Equal(t, "spec.service.metadata.annotations[service.beta.kubernetes.io/aws-load-balancer-internal]", errs[0].Field)
	require.Len(t, d.Check(map[string]any{"metadata": map[string]any{"annotations": nil}}, at), 1)
	none, err := ParseDeniedAnnotations(nil)
	require.NoError(t, err)
	require.Empty(t, none.Check(map[string]any{"metadata": nil}, at))
}
